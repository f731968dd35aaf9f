//! `xlat reproduce all`: one summary of the five reproductions' claims (summary.md and
//! summary.json beside the per-paper directories).

use super::claim::Totals;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The claims of every paper reproduced, counted.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Suite size (`small` or `full`).
    pub size: String,
    /// Whether the quick reproductions ran.
    pub quick: bool,
    /// `--max-refs`, if given.
    pub max_refs: Option<u64>,
    /// Each paper with its totals, in the order run.
    pub papers: Vec<(String, Totals)>,
}

impl Summary {
    /// The totals over every paper.
    pub fn total(&self) -> Totals {
        self.papers.iter().fold(Totals::default(), |a, (_, t)| Totals {
            independent: a.independent + t.independent,
            agrees: a.agrees + t.agrees,
            differs: a.differs + t.differs,
            not_measured: a.not_measured + t.not_measured,
            by_construction: a.by_construction + t.by_construction,
        })
    }

    /// The Markdown table: one row per paper and one for all.
    pub fn table(&self) -> String {
        let mut s = String::from(
            "| paper | independent claims | agree | differ | not measured | by construction (not counted) |\n\
             |---|---:|---:|---:|---:|---:|\n",
        );
        let row = |name: &str, t: &Totals| {
            format!(
                "| {name} | {} | {} | {} | {} | {} |\n",
                t.independent, t.agrees, t.differs, t.not_measured, t.by_construction
            )
        };
        for (p, t) in &self.papers {
            s += &row(p, t);
        }
        s + &row("all", &self.total())
    }

    /// The whole summary.md.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "# Reproductions: summary ({}{} workloads{})\n\n",
            if self.quick { "quick, " } else { "" },
            self.size,
            self.max_refs.map(|n| format!(", at most {n} references each")).unwrap_or_default()
        );
        s += &self.table();
        s += "\nA claim is independent unless its measured value is one of the model's inputs. Reports: ";
        s += &self.papers.iter().map(|(p, _)| format!("[{p}]({p}/report.md)")).collect::<Vec<_>>().join(", ");
        s + ".\n"
    }

    /// Writes `summary.md` and `summary.json` into `dir`; returns their paths.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let md = dir.join("summary.md");
        std::fs::write(&md, self.markdown()).map_err(|e| format!("{}: {e}", md.display()))?;
        let json = dir.join("summary.json");
        let papers: serde_json::Map<String, serde_json::Value> =
            self.papers.iter().map(|(p, t)| (p.clone(), serde_json::to_value(t).expect("serialisable"))).collect();
        let v = serde_json::json!({
            "size": self.size, "quick": self.quick, "max_refs": self.max_refs, "papers": papers, "total": self.total()
        });
        std::fs::write(&json, serde_json::to_string_pretty(&v).expect("serialisable") + "\n")
            .map_err(|e| format!("{}: {e}", json.display()))?;
        Ok(vec![md, json])
    }
}
