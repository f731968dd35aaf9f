//! `xlat curve`: the misses of every TLB size and associativity in one pass over a trace. The
//! work is in `xlat::curve`; this file parses the flags and prints or writes the results.

use anyhow::{anyhow, Context, Result};
use clap::Args;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;
use xlat::curve::{self, CurveResult, CurveSpec};
use xlat::plot::{Line, LineChart};
use xlat::trace;

#[derive(Args)]
pub struct CurveArgs {
    /// The trace file, or `-` for standard input.
    #[arg(long, short = 't', value_name = "TRACE")]
    trace: String,
    /// TLB sizes: a list (`8,16,32,64`) or every size of a range (`1..4096`) [default: the powers
    /// of two from 1 to 4096, those below an associativity skipped for it]
    #[arg(long, value_name = "SIZES")]
    entries: Option<String>,
    /// Associativities: way counts and `full` (fully associative), e.g. `full,1,2,4,8`.
    #[arg(long, value_name = "WAYS", default_value = "full")]
    ways: String,
    /// Replacement policy: lru (stack distances, one pass for all sizes), or fifo, random, nru,
    /// plru (each size simulated side by side, at most 256 TLBs: docs/curve.md, Bounds).
    #[arg(long, default_value = "lru")]
    policy: String,
    /// Base page sizes in bytes (suffixes K, M, G), one curve each, e.g. `4096,2M`.
    #[arg(long, value_name = "BYTES", default_value = "4096")]
    page_size: String,
    /// Approximate curve by spatial sampling of pages at this rate (SHARDS), e.g. 0.1.
    #[arg(long, value_name = "R")]
    sample: Option<f64>,
    /// Write the curve as JSON to this file (`-` for standard output).
    #[arg(long, value_name = "OUT.json")]
    json: Option<String>,
    /// Write the curve as CSV to this file (`-` for standard output).
    #[arg(long, value_name = "OUT.csv")]
    csv: Option<String>,
    /// Draw the miss ratios to this file (`.svg` or `.png`): a line per associativity and page
    /// size over a base-2 axis of entries.
    #[arg(long, value_name = "OUT.svg|png")]
    plot: Option<String>,
    /// Draw the miss ratio on a logarithmic axis (with --plot).
    #[arg(long)]
    log_y: bool,
    /// Trace format.
    #[arg(long, default_value = "auto", value_parser = ["auto", "lackey", "xtr", "champsim"])]
    format: String,
    /// Stop after this many references.
    #[arg(long, value_name = "N")]
    max_refs: Option<u64>,
    /// No table on standard output and no progress bar.
    #[arg(long, short = 'q')]
    quiet: bool,
}

pub fn cmd_curve(a: CurveArgs) -> Result<()> {
    super::refuse_overwriting_inputs(
        &[a.json.as_deref(), a.csv.as_deref(), a.plot.as_deref()],
        &[Path::new(&a.trace)],
    )?;
    let (entries, entries_range) = match &a.entries {
        Some(e) => curve::parse_entries(e)?,
        // The default sizes fit every associativity that fits any of them: a size below a way
        // count is skipped for it, as in a range.
        None => curve::default_entries(),
    };
    let mut page_sizes = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in a.page_size.split(',') {
        let b = super::parse_bytes(p).map_err(|e| anyhow!("--page-size: {e}"))?;
        if seen.insert(b) {
            page_sizes.push(b);
        }
    }
    let spec = CurveSpec {
        entries,
        entries_range,
        ways: curve::parse_ways(&a.ways)?,
        policy: curve::parse_policy(&a.policy)?,
        page_sizes,
        sample: a.sample,
        max_refs: a.max_refs,
        seed: 1,
    };
    spec.pairs()?;
    if a.entries.is_none() && !a.quiet {
        if let Some(note) = skipped_defaults(&spec) {
            eprintln!("xlat: note: {note}");
        }
    }
    let plot_kind = match a.plot.as_deref() {
        None => None,
        Some(p) if p.ends_with(".svg") => Some(false),
        Some(p) if p.ends_with(".png") => Some(true),
        Some(p) => anyhow::bail!("--plot {p}: expected a file name ending in .svg or .png"),
    };
    if a.log_y && a.plot.is_none() {
        anyhow::bail!("--log-y: draws the plot's miss-ratio axis logarithmic; give --plot OUT.svg|png too");
    }
    let (mut reader, format) = trace::open::open_reader_inline(&a.trace, super::format_arg(&a.format))?;
    let bar = super::term::progress(a.quiet, "{spinner} {elapsed} {human_pos} references read");
    let start = Instant::now();
    let result = curve::curve(reader.as_mut(), &spec, |n| {
        if let Some(b) = &bar {
            b.set_position(n);
        }
    })?;
    let seconds = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if result.trace.references == 0 {
        anyhow::bail!(
            "{}: the trace holds no memory references ({} records skipped, {} events): nothing to simulate",
            a.trace,
            result.reader.skipped,
            result.trace.events
        );
    }
    if let Some(path) = &a.json {
        let doc = to_json(&a.trace, format.name(), &spec, &result, seconds)?;
        super::write_output(path, &doc)?;
    }
    if let Some(path) = &a.csv {
        super::write_output(path, &to_csv(&result))?;
    }
    if let (Some(path), Some(png)) = (&a.plot, plot_kind) {
        let chart = chart(&a.trace, &spec, &result, a.log_y);
        let out = xlat::output::Output::start(path, "");
        let tmp = out.path().to_path_buf();
        if png { chart.write_png(&tmp) } else { chart.write_svg(&tmp) }
            .map_err(anyhow::Error::from)
            .and_then(|()| out.commit().with_context(|| format!("{path}: cannot write")))?;
    }
    let to_stdout = a.json.as_deref() == Some("-") || a.csv.as_deref() == Some("-");
    if !a.quiet && !to_stdout {
        out!("{}", table(&a.trace, &spec, &result));
        eprintln!(
            "{} points over {} lookups in {:.2} s ({:.1} M lookups/s)",
            result.curves.iter().map(|c| c.points.len()).sum::<usize>(),
            result.trace.lookups,
            seconds,
            result.trace.lookups as f64 / seconds.max(1e-9) / 1e6
        );
    }
    Ok(())
}

/// Which of the default sizes are skipped for which associativity (the sizes below it), as one
/// line; `None` when none is.
fn skipped_defaults(spec: &CurveSpec) -> Option<String> {
    let parts: Vec<String> = spec
        .ways
        .iter()
        .filter_map(|w| match *w {
            curve::Ways::N(n) => {
                let below: Vec<String> = spec.entries.iter().filter(|&&e| e < n).map(|e| e.to_string()).collect();
                (!below.is_empty()).then(|| format!("{} for {n} ways", below.join(",")))
            }
            curve::Ways::Full => None,
        })
        .collect();
    (!parts.is_empty()).then(|| format!("default sizes below an associativity skipped for it: {}", parts.join("; ")))
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

/// Misses per 1000 instructions (instruction fetches), `None` for a trace without any.
fn mpki(misses: u64, instructions: u64) -> Option<f64> {
    (instructions > 0).then(|| misses as f64 * 1000.0 / instructions as f64)
}

/// The JSON of the points of one curve, written as they are read (a curve may have millions).
struct PointsJson<'a> {
    curve: &'a curve::PageCurve,
    instructions: u64,
}

/// One point in the JSON (fields in the order the output has always had: by name).
#[derive(serde::Serialize)]
struct PointJson {
    entries: u32,
    miss_ratio: f64,
    misses: u64,
    mpki: Option<f64>,
    page_size: u64,
    ways: u32,
}

impl serde::Serialize for PointsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.curve;
        s.collect_seq(c.points.iter().map(|p| PointJson {
            entries: p.entries,
            miss_ratio: ratio(p.misses, c.lookups),
            misses: p.misses,
            mpki: mpki(p.misses, self.instructions),
            page_size: c.page_size,
            ways: p.ways,
        }))
    }
}

#[derive(serde::Serialize)]
struct CurveJson<'a> {
    lookups: u64,
    page_size: u64,
    points: PointsJson<'a>,
}

/// `--json`'s document (docs/curve.md).
#[derive(serde::Serialize)]
struct CurveDoc<'a> {
    curves: Vec<CurveJson<'a>>,
    page_size: u64,
    points: PointsJson<'a>,
    policy: &'static str,
    sample: Option<f64>,
    seconds: f64,
    trace: Value,
    xlat_version: &'static str,
}

fn to_json(path: &str, format: &str, spec: &CurveSpec, r: &CurveResult, seconds: f64) -> Result<String> {
    let first = &r.curves[0];
    let instructions = r.instructions();
    let doc = CurveDoc {
        curves: r
            .curves
            .iter()
            .map(|c| CurveJson {
                lookups: c.lookups,
                page_size: c.page_size,
                points: PointsJson { curve: c, instructions },
            })
            .collect(),
        page_size: first.page_size,
        points: PointsJson { curve: first, instructions },
        policy: spec.policy.name(),
        sample: spec.sample,
        seconds,
        trace: r.trace_json(path, format),
        xlat_version: env!("CARGO_PKG_VERSION"),
    };
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}

fn to_csv(r: &CurveResult) -> String {
    let mut out = String::from("entries,ways,misses,miss_ratio,mpki,page_size\n");
    for c in &r.curves {
        for p in &c.points {
            let m = mpki(p.misses, r.instructions()).map(|v| v.to_string()).unwrap_or_default();
            let _ = writeln!(
                out,
                "{},{},{},{},{},{}",
                p.entries,
                p.ways,
                p.misses,
                ratio(p.misses, c.lookups),
                m,
                c.page_size
            );
        }
    }
    out
}

fn ways_name(e: u32, w: u32) -> String {
    if e == w {
        "full".to_string()
    } else {
        w.to_string()
    }
}

fn table(path: &str, spec: &CurveSpec, r: &CurveResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{path}: {} references ({} instructions), {} policy{}",
        r.trace.references,
        r.instructions(),
        spec.policy.name(),
        match spec.sample {
            Some(s) => format!(", sampled at {s} (approximate)"),
            None => String::new(),
        }
    );
    for c in &r.curves {
        let _ = writeln!(out, "\npage size {} ({} lookups)", c.page_size, c.lookups);
        let _ = writeln!(out, "{:>8} {:>6} {:>12} {:>11} {:>10}", "entries", "ways", "misses", "miss ratio", "MPKI");
        for p in &c.points {
            let m = mpki(p.misses, r.instructions()).map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "{:>8} {:>6} {:>12} {:>10.4}% {:>10}",
                p.entries,
                ways_name(p.entries, p.ways),
                p.misses,
                100.0 * ratio(p.misses, c.lookups),
                m
            );
        }
    }
    out
}

/// Miss ratio (%) against entries on a base-2 axis: one line per associativity and page size,
/// through every point computed for it (a fully associative point of `n` entries also lies on
/// the `n`-way line, which it is).
fn chart(path: &str, spec: &CurveSpec, r: &CurveResult, log_y: bool) -> LineChart {
    let mut lines = Vec::new();
    for c in &r.curves {
        for w in &spec.ways {
            let name = match w {
                curve::Ways::Full => "fully associative".to_string(),
                curve::Ways::N(n) => format!("{n}-way"),
            };
            let name = if r.curves.len() > 1 { format!("{name}, {} pages", page_text(c.page_size)) } else { name };
            let points = c
                .points
                .iter()
                .filter(|p| match w {
                    curve::Ways::Full => p.ways == p.entries,
                    curve::Ways::N(n) => p.ways == *n,
                })
                .map(|p| (p.entries as f64, 100.0 * ratio(p.misses, c.lookups)))
                .collect();
            lines.push(Line { name, points });
        }
    }
    LineChart {
        title: format!("TLB miss ratio ({} policy): {path}", spec.policy.name()),
        x_label: "entries".into(),
        y_label: "miss ratio (%)".into(),
        lines,
        log_y,
        reference: None,
    }
}

/// A page size for a legend: `4 KB`, `2 MB`.
fn page_text(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KB", b >> 10),
        b => format!("{b} B"),
    }
}
