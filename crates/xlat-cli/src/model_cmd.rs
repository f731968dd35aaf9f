//! `xlat model`: talluri95's Table 2 formulas beside the simulated page tables, both built from
//! the same pages (a snapshot or a generated page set). The work is in `xlat::model`.

use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::fmt::Write as _;
use std::path::PathBuf;
use xlat::addr::PageSize;
use xlat::config::Config;
use xlat::model::{self, BlockPtes, ModelRow, SimRow};

#[derive(Args)]
pub struct ModelArgs {
    /// An address-space snapshot (`xlat snapshot`): every resident page is mapped.
    #[arg(long, value_name = "FILE", conflicts_with = "gen")]
    snapshot: Option<PathBuf>,
    /// Generated pages instead of a snapshot, one process: `uniform:N[:SEED]` (N distinct pages
    /// uniform below 2^36) or `runs:N[:SEED]` (N pages in runs of 1 to 64 consecutive pages).
    #[arg(long, value_name = "SPEC")]
    gen: Option<String>,
    /// A design as a TOML file (repeatable).
    #[arg(long = "config", short = 'c', value_name = "FILE")]
    configs: Vec<PathBuf>,
    /// A built-in design (repeatable; see `xlat presets`).
    #[arg(long = "preset", short = 'p', value_name = "NAME")]
    presets: Vec<String>,
    /// How clustered tables map page blocks: base-page PTEs, a superpage PTE per full block, or
    /// a partial-subblock PTE per active block (fss = 0, full blocks / active blocks, 1).
    #[arg(long, default_value = "base", value_parser = ["base", "superpage", "partial-subblock"])]
    ptes: String,
    /// Table 2's fss for clustered tables, given explicitly (0 to 1) instead of `--ptes`.
    #[arg(long, value_name = "F", conflicts_with = "ptes")]
    fss: Option<f64>,
    /// Write the results as JSON to this file (`-` for standard output, instead of the table).
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
}

/// Largest page table `xlat model` builds to compare with the formulas (its nodes are real
/// memory here, about their Table 2 size).
const MAX_SIMULATED_TABLE_BYTES: u64 = 2 << 30;

/// One design's result.
struct Entry {
    config: Config,
    pages: u64,
    formula: ModelRow,
    sim: SimRow,
}

pub fn cmd_model(a: ModelArgs) -> Result<()> {
    let mut inputs: Vec<&std::path::Path> = a.configs.iter().map(PathBuf::as_path).collect();
    inputs.extend(a.snapshot.as_deref());
    super::refuse_overwriting_inputs(&[a.json.as_deref()], &inputs)?;
    let configs = super::load_designs(&a.configs, &a.presets)?;
    for (i, c) in configs.iter().enumerate() {
        if configs[..i].iter().any(|o| o.name == c.name) {
            bail!("two designs are named '{}': give each config a distinct `name`", c.name);
        }
    }
    let ptes = match a.fss {
        Some(f) if !(0.0..=1.0).contains(&f) => bail!("--fss {f}: a fraction from 0 to 1"),
        Some(f) => BlockPtes::Fraction(f),
        None => BlockPtes::from_name(&a.ptes).expect("clap checks the name"),
    };
    let (source, snap, generated) = match (&a.snapshot, &a.gen) {
        (Some(path), _) => (path.display().to_string(), Some(xlat::snapshot::read(path)?), None),
        (None, Some(spec)) => (format!("generated {spec}"), None, Some(generate(spec)?)),
        (None, None) => bail!("nothing to model: give --snapshot FILE or --gen SPEC (see `xlat model --help`)"),
    };
    let mut entries = Vec::with_capacity(configs.len());
    for c in configs {
        let page = PageSize::from_bytes(c.page_size).expect("validated config");
        let pages = match (&snap, &generated) {
            (Some(s), _) => model::snapshot_pages(s, page),
            (None, Some(g)) => Ok(g.clone()),
            _ => unreachable!(),
        }
        .map_err(|e| anyhow!("config '{}': {e}", c.name))?;
        // As `xlat run --snapshot` would: the design's memory must hold the pages.
        let frames = c.os.memory_bytes / c.page_size;
        if pages.len() as u64 > frames {
            bail!(
                "config '{}': {} pages do not fit in os.memory_bytes = {} ({frames} frames): physical memory exhausted",
                c.name,
                pages.len(),
                c.os.memory_bytes
            );
        }
        let formula = model::evaluate(&pages, &c.page_table, page, ptes, None)
            .map_err(|e| anyhow!("config '{}': {e}", c.name))?;
        // The simulated radix and linear tables hold their nodes in this machine's memory.
        if formula.table_bytes > MAX_SIMULATED_TABLE_BYTES as f64 {
            bail!(
                "config '{}': the simulated {} table would take {:.1} GiB (Table 2 size of these pages), more than the {} GiB xlat model builds: model fewer or denser pages",
                c.name,
                c.page_table.kind.name(),
                formula.table_bytes / (1u64 << 30) as f64,
                MAX_SIMULATED_TABLE_BYTES >> 30
            );
        }
        let sim =
            model::simulate(&pages, &c.page_table, page, ptes).map_err(|e| anyhow!("config '{}': {e}", c.name))?;
        entries.push(Entry { pages: pages.len() as u64, config: c, formula, sim });
    }
    if let Some(path) = &a.json {
        super::write_output(path, &(serde_json::to_string_pretty(&json(&source, ptes, &entries))? + "\n"))?;
    }
    if a.json.as_deref() != Some("-") {
        out!("{}", table(&source, ptes, &entries));
    }
    Ok(())
}

/// The pages of a `--gen` spec, one process (ASID 0), sorted.
fn generate(spec: &str) -> Result<Vec<(u32, u64)>> {
    let bad = || anyhow!("--gen '{spec}': expected uniform:N[:SEED] or runs:N[:SEED], N from 1 to 10^7");
    let parts: Vec<&str> = spec.split(':').collect();
    if parts.len() < 2 || parts.len() > 3 {
        return Err(bad());
    }
    let n: u64 = parts[1].parse().ok().filter(|n| (1..=10_000_000).contains(n)).ok_or_else(bad)?;
    let seed: u64 = match parts.get(2) {
        Some(s) => s.parse().map_err(|_| bad())?,
        None => 1,
    };
    // splitmix64
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut pages = std::collections::BTreeSet::new();
    match parts[0] {
        "uniform" => {
            while (pages.len() as u64) < n {
                pages.insert(next() >> 28);
            }
        }
        "runs" => {
            while (pages.len() as u64) < n {
                let start = next() >> 28;
                let len = 1 + next() % 64;
                for v in start..(start + len).min(1 << 36) {
                    if (pages.len() as u64) < n {
                        pages.insert(v);
                    }
                }
            }
        }
        _ => return Err(bad()),
    }
    Ok(pages.into_iter().map(|v| (0, v)).collect())
}

fn ptes_name(p: BlockPtes) -> String {
    match p {
        BlockPtes::Fraction(f) => format!("fss {f}"),
        other => other.name().to_string(),
    }
}

fn json(source: &str, ptes: BlockPtes, entries: &[Entry]) -> serde_json::Value {
    use serde_json::json;
    let designs: Vec<_> = entries
        .iter()
        .map(|e| {
            json!({
                "name": e.config.name,
                "kind": e.config.page_table.kind.name(),
                "page_size": e.config.page_size,
                "mapped_pages": e.pages,
                "formula": e.formula,
                "simulated": e.sim,
                "difference": {
                    "table_bytes": e.sim.table_bytes as f64 - e.formula.table_bytes,
                    "lines": e.sim.lines - e.formula.lines,
                },
            })
        })
        .collect();
    json!({ "pages": source, "ptes": ptes_name(ptes), "designs": designs })
}

fn table(source: &str, ptes: BlockPtes, entries: &[Entry]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "pages: {source}; clustered page blocks: {}", ptes_name(ptes));
    let head = [
        "design",
        "table",
        "Table 2 row",
        "pages",
        "alpha",
        "fss",
        "bytes formula",
        "bytes simulated",
        "bytes diff",
        "lines formula",
        "lines simulated",
        "lines diff",
    ];
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or_else(|| "-".to_string());
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let f = &e.formula;
            vec![
                e.config.name.clone(),
                e.config.page_table.kind.name().to_string(),
                f.row.title().to_string(),
                e.pages.to_string(),
                opt(f.inputs.alpha),
                opt(f.inputs.fss),
                format!("{:.0}", f.table_bytes),
                e.sim.table_bytes.to_string(),
                format!("{:+.0}", e.sim.table_bytes as f64 - f.table_bytes),
                format!("{:.4}", f.lines),
                format!("{:.4}", e.sim.lines),
                format!("{:+.4}", e.sim.lines - f.lines),
            ]
        })
        .collect();
    let widths: Vec<usize> =
        (0..head.len()).map(|i| rows.iter().map(|r| r[i].len()).chain([head[i].len()]).max().unwrap_or(0)).collect();
    let line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i < 3 {
                let _ = write!(l, "{c:<w$}  ", w = widths[i]);
            } else {
                let _ = write!(l, "{c:>w$}  ", w = widths[i]);
            }
        }
        l.trim_end().to_string() + "\n"
    };
    s.push_str(&line(head.to_vec()));
    for r in &rows {
        s.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    s.push('\n');
    for e in entries {
        let f = &e.formula;
        let nact: Vec<String> =
            f.inputs.nactive.iter().map(|n| format!("Nactive(2^{})={}", n.log2_pages, n.regions)).collect();
        let _ = write!(s, "{}: {}", e.config.name, nact.join(" "));
        if let Some(l) = f.inputs.levels {
            let _ = write!(s, "; {l} levels");
        }
        if let (Some(r), Some(m)) = (f.inputs.r, f.inputs.m) {
            let _ = write!(s, "; r={r} m={m}");
        }
        if let Some(b) = f.inputs.buckets {
            let _ = write!(s, "; {b} buckets ({} bytes, not in the sizes)", f.bucket_bytes);
        }
        if let Some(h) = f.linear_with_hashed_bytes {
            let _ = write!(s, "; linear with hashed (formula only): {h} bytes");
        }
        if f.inputs.fss.is_some() && e.sim.block_ptes != ptes.name() {
            let _ = write!(s, "; the simulated table holds base-page PTEs only");
        }
        s.push('\n');
    }
    s
}
