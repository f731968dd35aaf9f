//! Design-space sweeps: a base design, parameters varied by path, a list of traces; every
//! (trace, point) simulated once, its result kept under a content hash, and one tidy table.
//!
//! The pieces, used alike by `xlat sweep`, the Python package and its Ray driver:
//! - [`Design`]: a design as a TOML table whose parameters can be set by dotted path
//!   (`tlb.0.entries`); every change is validated as a whole config.
//! - [`Sweep`]: a sweep file parsed into points (the cartesian product of `[vary]` with each
//!   `[[zip]]` group) and traces; [`Sweep::tasks`] groups the points not yet in a [`Store`] by
//!   trace, so that each group is one pass over its trace ([`run_designs`]).
//! - [`Store`]: one JSON file per finished point, named by its key (a hash of the design, the
//!   trace's content, the reference limit and the xlat version), written atomically: a sweep that
//!   is killed keeps every point finished before, and a rerun computes only the others.
//! - [`Sweep::table`]: one row per (trace, point): `trace`, the varied parameters, `name`,
//!   `status`, then every field of the design's JSON result as a dotted path (`tlb.0.misses`).

use crate::config::Config;
use crate::engine::{self, RunOptions, System};
use crate::report::{self, ReportInput};
use crate::trace;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Most rows a sweep may have: its points times its traces, each row one simulation of a design
/// over a trace and one row of its table. A larger sweep is refused before any point is made.
pub const MAX_ROWS: u64 = 100_000;

/// A sweep, design or run that cannot be done; one line naming the file or key.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SweepError(pub String);

impl SweepError {
    fn new(msg: impl std::fmt::Display) -> SweepError {
        SweepError(msg.to_string())
    }
}

type Result<T> = std::result::Result<T, SweepError>;

/// FNV-1a, 128 bits: the content hash of traces and points (stable across runs and machines).
pub fn fnv128(data: &[u8], mut h: u128) -> u128 {
    for &b in data {
        h ^= b as u128;
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    h
}

/// The FNV-1a 128-bit offset basis.
pub const FNV128_BASIS: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;

/// The content hash of a file, as 32 hex digits.
pub fn file_hash(path: &Path) -> Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| SweepError::new(format!("{}: {e}", path.display())))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut h = FNV128_BASIS;
    loop {
        let n = f.read(&mut buf).map_err(|e| SweepError::new(format!("{}: cannot read: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        h = fnv128(&buf[..n], h);
    }
    Ok(format!("{h:032x}"))
}

/// One design as its TOML table, settable by path and validated after every change.
#[derive(Clone, Debug, PartialEq)]
pub struct Design {
    table: toml::Table,
    /// Where it came from, for error messages ("preset x86-64", a file name).
    origin: String,
}

impl Design {
    /// A built-in preset.
    pub fn preset(name: &str) -> Result<Design> {
        let (n, text) = crate::config::PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| SweepError::new(crate::config::ConfigError::UnknownPreset(name.to_string())))?;
        Design::from_toml(text, &format!("preset {n}"))
    }

    /// A design from TOML text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Design> {
        Config::from_toml(text, origin).map_err(SweepError::new)?;
        let table: toml::Table = toml::from_str(text).map_err(|e| SweepError::new(format!("{origin}: {e}")))?;
        Ok(Design { table, origin: origin.to_string() })
    }

    /// A design from a TOML file.
    pub fn from_file(path: &Path) -> Result<Design> {
        let text = std::fs::read_to_string(path).map_err(|e| SweepError::new(format!("{}: {e}", path.display())))?;
        Design::from_toml(&text, &path.display().to_string())
    }

    /// A preset name, or else a config file.
    pub fn preset_or_file(name: &str, base_dir: &Path) -> Result<Design> {
        if crate::config::PRESETS.iter().any(|(n, _)| *n == name) {
            return Design::preset(name);
        }
        let path = base_dir.join(name);
        if !path.exists() && !name.contains('/') && !name.ends_with(".toml") {
            return Design::preset(name); // the unknown-preset error, with its suggestion
        }
        Design::from_file(&path)
    }

    /// The design's name.
    pub fn name(&self) -> &str {
        self.table.get("name").and_then(|v| v.as_str()).unwrap_or("")
    }

    /// The value at a dotted path (`tlb.0.entries`), if the design sets it.
    pub fn get(&self, path: &str) -> Option<&toml::Value> {
        let mut parts = path.split('.');
        let mut cur = self.table.get(parts.next()?)?;
        for p in parts {
            cur = match cur {
                toml::Value::Table(t) => t.get(p)?,
                toml::Value::Array(a) => a.get(p.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(cur)
    }

    /// Sets the parameter at a dotted path: `tlb.0.entries` is `entries` of the first `[[tlb]]`.
    /// Missing tables on the way are created (`stlb.entries` adds an `[stlb]`). The result must
    /// be a valid design, or nothing changes: an unknown key or a bad value is an error naming
    /// the path.
    pub fn set(&mut self, path: &str, value: toml::Value) -> Result<()> {
        self.set_all(&[(path.to_string(), value)])
    }

    /// Sets several parameters at once (a sweep point's): the result must be a valid design,
    /// not each step on the way (a TLB's `entries` and `ways` change together), or nothing
    /// changes.
    pub fn set_all(&mut self, assignments: &[(String, toml::Value)]) -> Result<()> {
        let mut table = self.table.clone();
        let mut new_path = None;
        for (path, value) in assignments {
            if new_path.is_none() && self.get(path).is_none() {
                new_path = Some(path.as_str());
            }
            set_in(&mut table, path, value.clone())
                .map_err(|why| SweepError::new(format!("{}: cannot set '{path}': {why}", self.origin)))?;
        }
        let what = assignments.iter().map(|(p, v)| format!("'{p}' = {}", show(v))).collect::<Vec<_>>().join(", ");
        let text = toml::to_string(&table).map_err(|e| SweepError::new(format!("{}: {what}: {e}", self.origin)))?;
        if let Err(e) = Config::from_toml(&text, &self.origin) {
            let msg = match e {
                crate::config::ConfigError::Parse { message, .. }
                    if new_path.is_some() && message.contains("unknown field") =>
                {
                    format!("{}: unknown parameter '{}' ({message})", self.origin, new_path.unwrap_or_default())
                }
                crate::config::ConfigError::Parse { message, .. } => format!("{}: {what}: {message}", self.origin),
                crate::config::ConfigError::Invalid { error, .. } => format!("{}: {what}: {error}", self.origin),
                other => other.to_string(),
            };
            return Err(SweepError(msg));
        }
        self.table = table;
        Ok(())
    }

    /// The design as TOML text: keys in a fixed order, so equal designs have equal text.
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.table).unwrap_or_default()
    }

    /// The validated config.
    pub fn config(&self) -> Result<Config> {
        Config::from_toml(&self.to_toml(), &self.origin).map_err(SweepError::new)
    }
}

fn show(v: &toml::Value) -> String {
    v.to_string()
}

fn set_in(table: &mut toml::Table, path: &str, value: toml::Value) -> std::result::Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err("expected a dotted path of keys and indices, like tlb.0.entries".into());
    }
    let mut cur: &mut toml::Value = table.entry(parts[0]).or_insert_with(|| {
        if parts.len() > 1 {
            toml::Value::Table(toml::Table::new())
        } else {
            value.clone()
        }
    });
    let mut walked = parts[0].to_string();
    for p in &parts[1..] {
        cur = match cur {
            toml::Value::Table(t) => t.entry(*p).or_insert_with(|| toml::Value::Table(toml::Table::new())),
            toml::Value::Array(a) => {
                let n = a.len();
                let i: usize = p.parse().map_err(|_| format!("'{walked}' is a list: expected an index, got '{p}'"))?;
                a.get_mut(i).ok_or_else(|| {
                    format!(
                        "'{walked}' has {n} entr{} (0 to {})",
                        if n == 1 { "y" } else { "ies" },
                        n.saturating_sub(1)
                    )
                })?
            }
            _ => return Err(format!("'{walked}' is a value, not a table")),
        };
        walked = format!("{walked}.{p}");
    }
    *cur = value;
    Ok(())
}

/// A JSON value (Python's, a sweep file's) as a TOML value: numbers, strings, booleans and lists
/// and tables of them.
pub fn json_to_toml(v: &Value) -> Option<toml::Value> {
    Some(match v {
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(a) => toml::Value::Array(a.iter().map(json_to_toml).collect::<Option<_>>()?),
        Value::Object(o) => {
            toml::Value::Table(o.iter().map(|(k, v)| Some((k.clone(), json_to_toml(v)?))).collect::<Option<_>>()?)
        }
        Value::Null => return None,
    })
}

/// A TOML value as JSON.
pub fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => json!(s),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => json!(f),
        toml::Value::Boolean(b) => json!(b),
        toml::Value::Datetime(d) => json!(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(t.iter().map(|(k, v)| (k.clone(), toml_to_json(v))).collect()),
    }
}

/// A sweep file (`docs/sweeps.md`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    base: String,
    traces: Vec<String>,
    #[serde(default)]
    vary: BTreeMap<String, toml::Spanned<Vec<toml::Value>>>,
    #[serde(default)]
    zip: Vec<BTreeMap<String, toml::Spanned<Vec<toml::Value>>>>,
    #[serde(default)]
    max_refs: Option<u64>,
    #[serde(default)]
    workloads: WorkloadsSpec,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct WorkloadsSpec {
    #[serde(default)]
    size: Option<String>,
    #[serde(default)]
    dir: Option<PathBuf>,
}

/// One trace of a sweep.
#[derive(Clone, Debug)]
pub struct SweepTrace {
    /// As the sweep file names it (the `trace` column).
    pub label: String,
    /// The file.
    pub path: PathBuf,
    /// Its content hash.
    pub hash: String,
}

/// One design point: the varied parameters' values and the design they make.
#[derive(Clone, Debug)]
pub struct Point {
    /// (path, value) of each varied parameter, in column order.
    pub params: Vec<(String, toml::Value)>,
    /// The design, with its generated name.
    pub design: Design,
}

/// A parsed sweep: its points and traces.
#[derive(Debug)]
pub struct Sweep {
    /// The varied parameters' paths, in the table's column order.
    pub params: Vec<String>,
    /// Every design point.
    pub points: Vec<Point>,
    /// The traces, in order.
    pub traces: Vec<SweepTrace>,
    /// The reference limit per trace.
    pub max_refs: Option<u64>,
}

/// A group of points to simulate in one pass over one trace.
#[derive(Clone, Debug)]
pub struct Task {
    /// Index into [`Sweep::traces`].
    pub trace: usize,
    /// Indices into [`Sweep::points`].
    pub points: Vec<usize>,
    /// The points' keys, in the same order.
    pub keys: Vec<String>,
}

/// The directory of finished points: `DIR/points/KEY.json`.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store under `dir` (created on first write).
    pub fn new(dir: &Path) -> Store {
        Store { dir: dir.to_path_buf() }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join("points").join(format!("{key}.json"))
    }

    /// A finished point's record, if there is one (a damaged file counts as missing).
    pub fn get(&self, key: &str) -> Option<Value> {
        let text = std::fs::read_to_string(self.path(key)).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        (v.get("key").and_then(Value::as_str) == Some(key)).then_some(v)
    }

    /// True if the point is finished.
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Keeps a finished point's record: written to a temporary file, then renamed into place.
    pub fn put(&self, key: &str, record: &Value) -> Result<()> {
        let dir = self.dir.join("points");
        std::fs::create_dir_all(&dir).map_err(|e| SweepError::new(format!("{}: cannot create: {e}", dir.display())))?;
        let path = self.path(key);
        let tmp = dir.join(format!(".{key}.{}.tmp", std::process::id()));
        let text = serde_json::to_string_pretty(record).unwrap_or_default() + "\n";
        std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            SweepError::new(format!("{}: cannot write: {e}", path.display()))
        })
    }
}

/// Which workload suite a `workload:NAME` trace comes from.
pub struct WorkloadSource<'a> {
    /// The manifest text and its name.
    pub manifest: (&'a str, &'a str),
    /// The default cache directory for a size.
    pub default_dir: &'a dyn Fn(crate::workloads::Size) -> PathBuf,
    /// Called before a workload is built (to tell the user).
    pub on_build: &'a dyn Fn(&str),
}

/// The workload manifest the library is built with (`workloads/manifest.toml`).
pub const MANIFEST: &str = include_str!("../../../workloads/manifest.toml");

/// `$XDG_CACHE_HOME/xlat/workloads/SIZE`, else `target/workloads/SIZE`: where `xlat workloads
/// build` keeps the suite.
pub fn default_workloads_dir(size: crate::workloads::Size) -> PathBuf {
    match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => Path::new(&x).join("xlat/workloads").join(size.name()),
        None => Path::new("target/workloads").join(size.name()),
    }
}

impl Sweep {
    /// Reads a sweep file; relative paths in it are relative to its directory.
    pub fn from_file(path: &Path, workloads: &WorkloadSource) -> Result<Sweep> {
        let text = std::fs::read_to_string(path).map_err(|e| SweepError::new(format!("{}: {e}", path.display())))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        Sweep::from_toml(&text, &path.display().to_string(), &dir, workloads)
    }

    /// Parses a sweep from TOML text; `file` names it in errors, `base_dir` anchors its paths.
    pub fn from_toml(text: &str, file: &str, base_dir: &Path, workloads: &WorkloadSource) -> Result<Sweep> {
        let spec: SweepFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1).unwrap_or(1);
            SweepError::new(format!("{file}: line {line}: {}", e.message().trim().replace('\n', " ")))
        })?;
        let base =
            Design::preset_or_file(&spec.base, base_dir).map_err(|e| SweepError::new(format!("{file}: base: {e}")))?;
        // Factors of the product, each a list of assignments: every [vary] key alone, then each
        // [[zip]] group (its lists taken together, element by element).
        let mut params: Vec<String> = Vec::new();
        let mut factors: Vec<Vec<Vec<(String, toml::Value)>>> = Vec::new();
        let add_param = |p: &str, params: &mut Vec<String>| -> Result<()> {
            if params.iter().any(|q| q == p) {
                return Err(SweepError::new(format!("{file}: parameter '{p}' is varied twice")));
            }
            params.push(p.to_string());
            Ok(())
        };
        let mut vary: Vec<_> = spec.vary.iter().collect();
        vary.sort_by_key(|(_, v)| v.span().start);
        for (path, values) in vary {
            add_param(path, &mut params)?;
            if values.get_ref().is_empty() {
                return Err(SweepError::new(format!("{file}: vary.\"{path}\": expected a list of at least one value")));
            }
            factors.push(values.get_ref().iter().map(|v| vec![(path.clone(), v.clone())]).collect());
        }
        for (g, group) in spec.zip.iter().enumerate() {
            let mut keys: Vec<_> = group.iter().collect();
            keys.sort_by_key(|(_, v)| v.span().start);
            let Some(n) = keys.first().map(|(_, v)| v.get_ref().len()) else { continue };
            for (path, values) in &keys {
                add_param(path, &mut params)?;
                if values.get_ref().len() != n || n == 0 {
                    return Err(SweepError::new(format!(
                        "{file}: zip group {}: every list must have the same length, at least 1: '{}' has {}, '{path}' has {}",
                        g + 1,
                        keys[0].0,
                        n,
                        values.get_ref().len()
                    )));
                }
            }
            factors.push(
                (0..n).map(|i| keys.iter().map(|(p, v)| ((*p).clone(), v.get_ref()[i].clone())).collect()).collect(),
            );
        }
        // The cartesian product, the first factor outermost: counted first (a sweep above
        // [`MAX_ROWS`] is refused before any point is made), then made and checked one point at
        // a time, so that the first invalid point stops the sweep at once.
        let sizes: Vec<u64> = factors.iter().map(|f| f.len() as u64).collect();
        let count = sizes.iter().try_fold(1u64, |n, &k| n.checked_mul(k));
        let traces = spec.traces.len().max(1) as u64;
        let total = match count.and_then(|n| n.checked_mul(traces)) {
            Some(rows) if rows <= MAX_ROWS => count.unwrap_or(0),
            rows => {
                let product = if sizes.len() > 8 {
                    let head: Vec<String> = sizes[..8].iter().map(u64::to_string).collect();
                    format!("{} x ... ({} lists)", head.join(" x "), sizes.len())
                } else {
                    sizes.iter().map(u64::to_string).collect::<Vec<_>>().join(" x ")
                };
                let t = spec.traces.len();
                let made = match (count, rows) {
                    (Some(n), Some(r)) => {
                        format!("{n} points over {t} trace{} make {r} rows", if t == 1 { "" } else { "s" })
                    }
                    (Some(n), None) => format!("{n} points over {t} traces make over 2^64 rows"),
                    _ => "over 2^64 points".to_string(),
                };
                return Err(SweepError::new(format!(
                    "{file}: [vary] and [[zip]] lists of {product} values: {made}, but a sweep has at most {MAX_ROWS} (each row is one simulation): vary fewer values, or split the sweep"
                )));
            }
        };
        let mut points = Vec::with_capacity(total as usize);
        let mut names = std::collections::HashSet::new();
        for index in 0..total {
            let mut rest = index;
            let mut digits = vec![0usize; factors.len()];
            for (d, f) in digits.iter_mut().zip(&factors).rev() {
                *d = (rest % f.len() as u64) as usize;
                rest /= f.len() as u64;
            }
            let mut assign: Vec<(String, toml::Value)> =
                factors.iter().zip(&digits).flat_map(|(f, &d)| f[d].iter().cloned()).collect();
            let mut d = base.clone();
            d.origin = format!("{file}: base {}", spec.base);
            for (p, v) in &assign {
                if let toml::Value::Array(_) | toml::Value::Table(_) | toml::Value::Datetime(_) = v {
                    return Err(SweepError::new(format!(
                        "{file}: '{p}': expected numbers, strings or booleans in its list, got {v}"
                    )));
                }
            }
            d.set_all(&assign)?;
            if !params.iter().any(|p| p == "name") {
                let mut name = base.name().to_string();
                for (p, v) in &assign {
                    let v = match v {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    name.push_str(&format!(" {p}={v}"));
                }
                // A design's name is any string: no need to check the design again.
                set_in(&mut d.table, "name", toml::Value::String(name))
                    .map_err(|why| SweepError::new(format!("{}: cannot set 'name': {why}", d.origin)))?;
            }
            if !names.insert(d.name().to_string()) {
                return Err(SweepError::new(format!("{file}: two points are named '{}'", d.name())));
            }
            assign.sort_by_key(|(p, _)| params.iter().position(|q| q == p));
            points.push(Point { params: assign, design: d });
        }
        if spec.traces.is_empty() {
            return Err(SweepError::new(format!("{file}: traces: expected at least one trace file or workload:NAME")));
        }
        let size_name = spec.workloads.size.as_deref().unwrap_or("small");
        let size = crate::workloads::Size::from_name(size_name).ok_or_else(|| {
            SweepError::new(format!("{file}: workloads.size: expected small or full, got '{size_name}'"))
        })?;
        let wdir =
            spec.workloads.dir.as_ref().map(|d| base_dir.join(d)).unwrap_or_else(|| (workloads.default_dir)(size));
        let mut manifest = None;
        let mut traces = Vec::new();
        for label in &spec.traces {
            if traces.iter().any(|t: &SweepTrace| &t.label == label) {
                return Err(SweepError::new(format!("{file}: trace '{label}' is listed twice")));
            }
            let path = match label.strip_prefix("workload:") {
                Some(name) => {
                    if manifest.is_none() {
                        manifest = Some(
                            crate::workloads::Manifest::parse(workloads.manifest.0, workloads.manifest.1)
                                .map_err(SweepError::new)?,
                        );
                    }
                    let m = manifest.as_ref().expect("parsed above");
                    let w =
                        m.select(&[name.to_string()]).map_err(|e| SweepError::new(format!("{file}: traces: {e}")))?[0];
                    if crate::workloads::up_to_date(w, size, &wdir).is_none() {
                        (workloads.on_build)(&w.name);
                        crate::workloads::build(w, size, &wdir, false).map_err(SweepError::new)?;
                    }
                    crate::workloads::trace_path(&wdir, &w.name)
                }
                None => base_dir.join(label),
            };
            let hash = file_hash(&path).map_err(|e| SweepError::new(format!("{file}: trace '{label}': {e}")))?;
            traces.push(SweepTrace { label: label.clone(), path, hash });
        }
        Ok(Sweep { params, points, traces, max_refs: spec.max_refs })
    }

    /// The key of a (trace, point): the content hash of the design, the trace, the reference
    /// limit and the xlat version.
    pub fn key(&self, trace: usize, point: usize) -> String {
        point_key(&self.points[point].design, &self.traces[trace].hash, self.max_refs)
    }

    /// The points not yet in `store`, grouped by trace into tasks of at most `group` points, in
    /// as many tasks per trace as it takes to give `jobs` workers work.
    pub fn tasks(&self, store: &Store, jobs: usize, group: usize) -> Vec<Task> {
        let mut missing: Vec<(usize, Vec<usize>)> = Vec::new();
        for t in 0..self.traces.len() {
            let m: Vec<usize> = (0..self.points.len()).filter(|&p| !store.has(&self.key(t, p))).collect();
            if !m.is_empty() {
                missing.push((t, m));
            }
        }
        let per_trace = jobs.max(1).div_ceil(missing.len().max(1));
        let mut tasks = Vec::new();
        for (t, m) in missing {
            let size = m.len().div_ceil(per_trace).clamp(1, group.max(1));
            for chunk in m.chunks(size) {
                let keys = chunk.iter().map(|&p| self.key(t, p)).collect();
                tasks.push(Task { trace: t, points: chunk.to_vec(), keys });
            }
        }
        tasks
    }

    /// The records a task's results make, to [`Store::put`] under the task's keys.
    pub fn records(&self, task: &Task, results: &[Value]) -> Vec<Value> {
        let t = &self.traces[task.trace];
        task.points
            .iter()
            .zip(&task.keys)
            .zip(results)
            .map(|((&p, key), r)| {
                let params: serde_json::Map<String, Value> =
                    self.points[p].params.iter().map(|(k, v)| (k.clone(), toml_to_json(v))).collect();
                json!({
                    "key": key,
                    "trace": t.label,
                    "trace_hash": t.hash,
                    "max_refs": self.max_refs,
                    "params": params,
                    "design": self.points[p].design.to_toml(),
                    "result": r,
                })
            })
            .collect()
    }

    /// Runs one task and keeps its points in `store`.
    pub fn run_task(&self, task: &Task, store: &Store) -> Result<()> {
        let t = &self.traces[task.trace];
        let configs = task.points.iter().map(|&p| self.points[p].design.config()).collect::<Result<Vec<_>>>()?;
        let doc = run_designs(&t.path.display().to_string(), &configs, self.max_refs, |_| {})?;
        let results = doc["configs"].as_array().cloned().unwrap_or_default();
        for (key, rec) in task.keys.iter().zip(self.records(task, &results)) {
            store.put(key, &rec)?;
        }
        Ok(())
    }

    /// The table of every (trace, point) in `store`: columns, then rows of JSON values (null
    /// where a row lacks a column; a point not in the store has only its parameters).
    pub fn table(&self, store: &Store) -> (Vec<String>, Vec<Vec<Value>>) {
        let mut columns: Vec<String> = vec!["trace".into()];
        columns.extend(self.params.iter().cloned());
        columns.extend(["name".to_string(), "status".to_string()]);
        let fixed = columns.len();
        // Column of each name (a name given twice among the fixed ones: its last column).
        let mut index: std::collections::HashMap<String, usize> =
            columns.iter().enumerate().map(|(i, c)| (c.clone(), i)).collect();
        // Each row's cells as (column, value), the columns of the results named in the order
        // they first appear.
        let mut rows_kv: Vec<Vec<(usize, Value)>> = Vec::new();
        for (t, tr) in self.traces.iter().enumerate() {
            for (p, pt) in self.points.iter().enumerate() {
                let mut kv: Vec<(usize, Value)> = vec![(index["trace"], json!(tr.label))];
                kv.extend(pt.params.iter().map(|(k, v)| (index[k.as_str()], toml_to_json(v))));
                kv.push((index["name"], json!(pt.design.name())));
                match store.get(&self.key(t, p)) {
                    Some(rec) => {
                        let r = &rec["result"];
                        kv.push((index["status"], r.get("status").cloned().unwrap_or(Value::Null)));
                        let mut flat = Vec::new();
                        flatten("", r, &mut flat);
                        for (k, v) in flat {
                            let i = match index.get(&k) {
                                // A varied parameter that the result also reports keeps its own
                                // column.
                                Some(&i) if i < fixed => continue,
                                Some(&i) => i,
                                None => {
                                    columns.push(k.clone());
                                    index.insert(k, columns.len() - 1);
                                    columns.len() - 1
                                }
                            };
                            kv.push((i, v));
                        }
                    }
                    None => kv.push((index["status"], json!("missing"))),
                }
                rows_kv.push(kv);
            }
        }
        let rows = rows_kv
            .into_iter()
            .map(|kv| {
                let mut row = vec![Value::Null; columns.len()];
                for (i, v) in kv {
                    row[i] = v;
                }
                row
            })
            .collect();
        (columns, rows)
    }
}

/// The key of a design over a trace (by content hash) with a reference limit.
pub fn point_key(design: &Design, trace_hash: &str, max_refs: Option<u64>) -> String {
    let text = format!(
        "xlat-sweep 1\n{}\n{trace_hash}\n{}\n{}",
        env!("CARGO_PKG_VERSION"),
        max_refs.map(|n| n.to_string()).unwrap_or_default(),
        design.to_toml()
    );
    format!("{:032x}", fnv128(text.as_bytes(), FNV128_BASIS))
}

/// Leaves of a JSON value as (dotted path, value); arrays by index.
pub fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    let join = |k: &str| if prefix.is_empty() { k.to_string() } else { format!("{prefix}.{k}") };
    match v {
        Value::Object(o) => o.iter().for_each(|(k, v)| flatten(&join(k), v, out)),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| flatten(&join(&i.to_string()), v, out)),
        other => out.push((prefix.to_string(), other.clone())),
    }
}

/// Simulates designs over a trace in one pass: the JSON document `xlat run --json` writes. An
/// empty trace, an unreadable one or designs that all fail are errors; some failing is not.
pub fn run_designs(
    trace_path: &str,
    configs: &[Config],
    max_refs: Option<u64>,
    progress: impl FnMut(u64),
) -> Result<Value> {
    let systems = systems(configs)?;
    let (mut reader, format) = trace::open::open_reader_inline(trace_path, None).map_err(SweepError::new)?;
    run_systems(trace_path, reader.as_mut(), format, systems, max_refs, progress)
}

/// The systems of designs to simulate together: distinct names, each one valid.
pub fn systems(configs: &[Config]) -> Result<Vec<System>> {
    for (i, c) in configs.iter().enumerate() {
        if configs[..i].iter().any(|o| o.name == c.name) {
            return Err(SweepError::new(format!(
                "two designs are named '{}': give each config a distinct `name`",
                c.name
            )));
        }
    }
    if configs.is_empty() {
        return Err(SweepError::new("no design given"));
    }
    configs.iter().map(|c| System::new(c).map_err(|e| SweepError::new(format!("config '{}': {e}", c.name)))).collect()
}

/// [`run_designs`] over a trace already opened (`trace_path` names it in the results).
pub fn run_systems(
    trace_path: &str,
    reader: &mut dyn trace::TraceReader,
    format: trace::Format,
    mut systems: Vec<System>,
    max_refs: Option<u64>,
    progress: impl FnMut(u64),
) -> Result<Value> {
    let start = std::time::Instant::now();
    let summary = engine::run(reader, &mut systems, RunOptions { max_refs }, progress)
        .map_err(|e| SweepError::new(format!("{trace_path}: {e}")))?;
    if summary.trace.references == 0 {
        return Err(SweepError::new(format!(
            "{trace_path}: the trace holds no memory references ({} records skipped, {} events): nothing to simulate",
            summary.reader.skipped, summary.trace.events
        )));
    }
    let input =
        ReportInput { trace_path, format: format.name(), summary: &summary, seconds: start.elapsed().as_secs_f64() };
    let failed: Vec<String> =
        systems.iter().filter_map(|s| s.failure().map(|f| report::failure_message(&input, f))).collect();
    if failed.len() == systems.len() {
        return Err(SweepError::new(match failed.len() {
            1 => failed[0].clone(),
            n => format!("all {n} designs failed: {}", failed.join("; ")),
        }));
    }
    Ok(report::json(&input, &systems))
}

/// One CSV field: quoted if it holds a comma, quote or line break.
fn csv_field(v: &Value) -> String {
    let s = match v {
        Value::Null => return String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// The table as CSV, a header line first.
pub fn table_csv(columns: &[String], rows: &[Vec<Value>]) -> String {
    let mut out = String::new();
    let line = |fields: Vec<String>| fields.join(",") + "\n";
    out.push_str(&line(columns.iter().map(|c| csv_field(&json!(c))).collect()));
    for r in rows {
        out.push_str(&line(r.iter().map(csv_field).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_workloads() -> WorkloadSource<'static> {
        WorkloadSource { manifest: (MANIFEST, "manifest"), default_dir: &default_workloads_dir, on_build: &|_| {} }
    }

    #[test]
    fn set_by_path_changes_the_design_and_validates_it() {
        let mut d = Design::preset("x86-64").unwrap();
        d.set("tlb.0.entries", toml::Value::Integer(128)).unwrap();
        assert_eq!(d.config().unwrap().tlb[0].entries, 128);
        assert_eq!(d.get("tlb.0.entries"), Some(&toml::Value::Integer(128)));
        let before = d.clone();
        let e = d.set("tlb.0.entriez", toml::Value::Integer(1)).unwrap_err().to_string();
        assert!(e.contains("unknown parameter 'tlb.0.entriez'"), "{e}");
        let e = d.set("tlb.9.entries", toml::Value::Integer(1)).unwrap_err().to_string();
        assert!(e.contains("cannot set 'tlb.9.entries'"), "{e}");
        let e = d.set("tlb.0.entries", toml::Value::Integer(0)).unwrap_err().to_string();
        assert!(e.contains("'tlb.0.entries' = 0"), "{e}");
        assert_eq!(d, before, "a failed set changes nothing");
    }

    #[test]
    fn vary_and_zip_make_the_product_in_file_order() {
        let text = r#"
base = "x86-64"
traces = []
[vary]
"tlb.0.entries" = [16, 32]
"page_table.kind" = ["radix", "hashed"]
[[zip]]
"tlb.0.ways" = [1, 2]
"tlb.0.policy" = ["lru", "fifo"]
"#;
        let e = Sweep::from_toml(text, "s.toml", Path::new("."), &no_workloads()).unwrap_err().to_string();
        assert!(e.contains("traces: expected at least one"), "{e}");
        let text = text.replace("traces = []", "traces = [\"../../data/demo.xtr\"]");
        let s = Sweep::from_toml(&text, "s.toml", Path::new(env!("CARGO_MANIFEST_DIR")), &no_workloads()).unwrap();
        assert_eq!(s.params, ["tlb.0.entries", "page_table.kind", "tlb.0.ways", "tlb.0.policy"]);
        assert_eq!(s.points.len(), 2 * 2 * 2);
        let p = &s.points[3];
        assert_eq!(p.params[0].1, toml::Value::Integer(16));
        assert_eq!(p.params[1].1, toml::Value::String("hashed".into()));
        assert_eq!(p.params[2].1, toml::Value::Integer(2));
        assert_eq!(p.params[3].1, toml::Value::String("fifo".into()));
        let c = p.design.config().unwrap();
        assert_eq!((c.tlb[0].entries, c.tlb[0].ways), (16, Some(2)));
        assert_eq!(p.design.name(), "x86-64 tlb.0.entries=16 page_table.kind=hashed tlb.0.ways=2 tlb.0.policy=fifo");
        // Keys differ by design and are stable.
        assert_ne!(s.key(0, 0), s.key(0, 1));
        assert_eq!(s.key(0, 3), point_key(&p.design, &s.traces[0].hash, None));
    }

    #[test]
    fn a_points_parameters_are_checked_together() {
        // 1536 entries of 12 ways to 512 of 4: neither change alone is a valid design.
        let mut d = Design::preset("x86-64").unwrap();
        let e = d.set("tlb.2.entries", toml::Value::Integer(512)).unwrap_err().to_string();
        assert!(e.contains("'tlb.2.entries' = 512"), "{e}");
        let both =
            [("tlb.2.entries".to_string(), toml::Value::Integer(512)), ("tlb.2.ways".into(), toml::Value::Integer(4))];
        d.set_all(&both).unwrap();
        let c = d.config().unwrap();
        assert_eq!((c.tlb[2].entries, c.tlb[2].ways), (512, Some(4)));
        let before = d.clone();
        let bad =
            [("tlb.2.entries".to_string(), toml::Value::Integer(96)), ("tlb.2.ways".into(), toml::Value::Integer(7))];
        let e = d.set_all(&bad).unwrap_err().to_string();
        assert!(e.contains("'tlb.2.entries' = 96, 'tlb.2.ways' = 7"), "{e}");
        assert_eq!(d, before, "a failed set changes nothing");
        let text = "base = \"x86-64\"\ntraces = [\"../../data/demo.xtr\"]\n[[zip]]\n\"tlb.2.entries\" = [512, 1024]\n\"tlb.2.ways\" = [4, 8]\n";
        let s = Sweep::from_toml(text, "s.toml", Path::new(env!("CARGO_MANIFEST_DIR")), &no_workloads()).unwrap();
        assert_eq!(s.points.len(), 2);
    }
}
