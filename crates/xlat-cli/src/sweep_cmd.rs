//! `xlat sweep SWEEP.toml`: run a design-space sweep (`xlat::sweep`) on this machine, or on a
//! Ray cluster through the xlat Python package, and write its table as CSV and Parquet.

use anyhow::{anyhow, bail, Result};
use clap::Args;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use xlat::sweep::{self, Store, Sweep, WorkloadSource};

#[derive(Args)]
pub struct SweepArgs {
    /// The sweep file: base design, parameters to vary, traces (docs/sweeps.md).
    file: PathBuf,
    /// Where the finished points and the tables go (default: the sweep file's name with `.out`
    /// for `.toml`, beside it).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Passes over traces run at once (default: the number of CPUs).
    #[arg(long, short = 'j', value_name = "N")]
    jobs: Option<usize>,
    /// Most designs simulated in one pass over a trace.
    #[arg(long, value_name = "N", default_value_t = 32)]
    group: usize,
    /// Run the points as tasks on the Ray cluster at this address (`auto`, `HOST:PORT`), through
    /// the xlat Python package (`python3 -m xlat sweep`; $XLAT_PYTHON names another interpreter).
    #[arg(long, value_name = "ADDRESS")]
    ray: Option<String>,
    /// No progress bar and no summary.
    #[arg(long, short = 'q')]
    quiet: bool,
}

/// The default output directory: `NAME.out` beside `NAME.toml`.
fn default_out(file: &Path) -> PathBuf {
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "sweep".into());
    file.with_file_name(format!("{stem}.out"))
}

pub fn workload_source() -> WorkloadSource<'static> {
    WorkloadSource {
        manifest: (crate::workloads_cmd::MANIFEST, crate::workloads_cmd::MANIFEST_NAME),
        default_dir: &crate::workloads_cmd::default_dir,
        on_build: &|name| eprintln!("xlat sweep: building workload {name} (xlat workloads build --only {name})"),
    }
}

pub fn cmd_sweep(a: SweepArgs) -> Result<()> {
    if a.group == 0 {
        bail!("--group must be at least 1");
    }
    if a.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let out = a.out.clone().unwrap_or_else(|| default_out(&a.file));
    let sweep = Sweep::from_file(&a.file, &workload_source())?;
    let store = Store::new(&out);
    let started = Instant::now();
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let total = sweep.points.len() * sweep.traces.len();
    let tasks = sweep.tasks(&store, jobs, a.group);
    let todo: usize = tasks.iter().map(|t| t.points.len()).sum();
    if todo > 0 {
        match &a.ray {
            Some(address) => run_on_ray(&a, &out, address)?,
            None => run_local(&sweep, &store, tasks, jobs, a.quiet)?,
        }
    }
    let (columns, rows) = sweep.table(&store);
    let missing =
        rows.iter().filter(|r| r[columns.iter().position(|c| c == "status").unwrap_or(0)] == "missing").count();
    if missing > 0 {
        bail!("{}: {missing} of {total} points have no result in {}", a.file.display(), out.display());
    }
    let csv_path = out.join("results.csv");
    let pq_path = out.join("results.parquet");
    write_file(&csv_path, sweep::table_csv(&columns, &rows).as_bytes())?;
    write_file(&pq_path, &parquet_bytes(&columns, &rows)?)?;
    let failed = rows.iter().filter(|r| r[columns.iter().position(|c| c == "status").unwrap_or(0)] == "failed").count();
    if !a.quiet {
        eprintln!(
            "sweep: {} point{} x {} trace{}: {todo} simulated in {:.2} s, {} already done{}; tables: {} and {}",
            sweep.points.len(),
            if sweep.points.len() == 1 { "" } else { "s" },
            sweep.traces.len(),
            if sweep.traces.len() == 1 { "" } else { "s" },
            started.elapsed().as_secs_f64(),
            total - todo,
            if failed > 0 { format!(", {failed} failed (see the status and error columns)") } else { String::new() },
            csv_path.display(),
            pq_path.display()
        );
    }
    Ok(())
}

/// Runs the tasks on `jobs` threads; every finished task's points are in the store at once. On
/// an error the running tasks finish and no new one starts.
fn run_local(sweep: &Sweep, store: &Store, tasks: Vec<sweep::Task>, jobs: usize, quiet: bool) -> Result<()> {
    let todo: u64 = tasks.iter().map(|t| t.points.len() as u64).sum();
    let bar = super::term::progress(quiet, "{bar:40} {pos}/{len} points done {elapsed} (eta {eta}) {msg}");
    if let Some(b) = &bar {
        b.set_length(todo);
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let bar = Arc::new(bar);
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(tasks.len()) {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(task) = tasks.get(i) else { break };
                    match sweep.run_task(task, store) {
                        Ok(()) => {
                            if let Some(b) = bar.as_ref() {
                                b.inc(task.points.len() as u64);
                            }
                        }
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(anyhow!(e));
                        }
                    }
                }
            });
        }
    });
    if let Some(b) = bar.as_ref() {
        b.finish_and_clear();
    }
    match error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Runs the missing points on a Ray cluster: `python3 -m xlat sweep ... --ray ADDRESS` stores
/// them in the same directory; this command then writes the tables as for a local run.
fn run_on_ray(a: &SweepArgs, out: &Path, address: &str) -> Result<()> {
    let python = std::env::var_os("XLAT_PYTHON").unwrap_or_else(|| "python3".into());
    let mut cmd = std::process::Command::new(&python);
    cmd.args(["-m", "xlat", "sweep", "--points-only", "--ray", address, "--group", &a.group.to_string(), "--out"])
        .arg(out)
        .arg(&a.file);
    if let Some(j) = a.jobs {
        cmd.args(["--jobs", &j.to_string()]);
    }
    if a.quiet {
        cmd.arg("--quiet");
    }
    let status = cmd.status().map_err(|e| {
        anyhow!(
            "--ray runs the sweep through the xlat Python package, but {} cannot run: {e} (install it: pip install ./bindings/python; $XLAT_PYTHON names the interpreter)",
            python.to_string_lossy()
        )
    })?;
    match status.code() {
        Some(0) => Ok(()),
        // The Python side has printed its one-line error.
        Some(2) => std::process::exit(2),
        _ => bail!(
            "--ray: `{} -m xlat sweep` failed ({status}); is the xlat Python package installed (pip install ./bindings/python)?",
            python.to_string_lossy()
        ),
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| anyhow!("{}: cannot create: {e}", d.display()))?;
    }
    let name = path.display().to_string();
    let o = xlat::output::Output::start(&name, "");
    o.create().and_then(|mut f| f.write_all(bytes)).map_err(|e| anyhow!("{name}: cannot write: {e}"))?;
    o.commit().map_err(|e| anyhow!("{name}: cannot write: {e}"))
}

/// A column's Parquet type, from its values: all booleans, all integers, all numbers, or text
/// (other values as their JSON text).
#[derive(Clone, Copy, PartialEq)]
enum ColType {
    Bool,
    Int,
    Float,
    Text,
}

fn col_type(rows: &[Vec<Value>], i: usize) -> ColType {
    let vals: Vec<&Value> = rows.iter().map(|r| &r[i]).filter(|v| !v.is_null()).collect();
    if vals.is_empty() {
        ColType::Text
    } else if vals.iter().all(|v| v.is_boolean()) {
        ColType::Bool
    } else if vals.iter().all(|v| v.is_i64()) {
        ColType::Int
    } else if vals.iter().all(|v| v.is_number()) {
        ColType::Float
    } else {
        ColType::Text
    }
}

/// The table as a Parquet file: one row group, every column optional (null where a row lacks it).
pub fn parquet_bytes(columns: &[String], rows: &[Vec<Value>]) -> Result<Vec<u8>> {
    use parquet::basic::{LogicalType, Repetition, Type as Physical};
    use parquet::column::writer::ColumnWriter;
    use parquet::data_type::ByteArray;
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::types::Type;
    let types: Vec<ColType> = (0..columns.len()).map(|i| col_type(rows, i)).collect();
    let fields = columns
        .iter()
        .zip(&types)
        .map(|(c, t)| {
            let (phys, logical) = match t {
                ColType::Bool => (Physical::BOOLEAN, None),
                ColType::Int => (Physical::INT64, None),
                ColType::Float => (Physical::DOUBLE, None),
                ColType::Text => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
            };
            Type::primitive_type_builder(c, phys)
                .with_repetition(Repetition::OPTIONAL)
                .with_logical_type(logical)
                .build()
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let schema = Arc::new(Type::group_type_builder("sweep").with_fields(fields).build()?);
    let mut buf = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut buf, schema, Arc::new(WriterProperties::builder().build()))?;
    let mut rg = writer.next_row_group()?;
    let mut i = 0;
    while let Some(mut col) = rg.next_column()? {
        let vals: Vec<&Value> = rows.iter().map(|r| &r[i]).collect();
        let defs: Vec<i16> = vals.iter().map(|v| i16::from(!v.is_null())).collect();
        let present = vals.iter().filter(|v| !v.is_null());
        match col.untyped() {
            ColumnWriter::BoolColumnWriter(w) => {
                w.write_batch(&present.map(|v| v.as_bool().unwrap_or(false)).collect::<Vec<_>>(), Some(&defs), None)?;
            }
            ColumnWriter::Int64ColumnWriter(w) => {
                w.write_batch(&present.map(|v| v.as_i64().unwrap_or(0)).collect::<Vec<_>>(), Some(&defs), None)?;
            }
            ColumnWriter::DoubleColumnWriter(w) => {
                w.write_batch(&present.map(|v| v.as_f64().unwrap_or(f64::NAN)).collect::<Vec<_>>(), Some(&defs), None)?;
            }
            ColumnWriter::ByteArrayColumnWriter(w) => {
                let texts: Vec<ByteArray> = present
                    .map(|v| match v {
                        Value::String(s) => ByteArray::from(s.as_str()),
                        other => ByteArray::from(other.to_string().as_str()),
                    })
                    .collect();
                w.write_batch(&texts, Some(&defs), None)?;
            }
            _ => bail!("internal: unexpected Parquet column type"),
        }
        col.close()?;
        i += 1;
    }
    rg.close()?;
    writer.close()?;
    Ok(buf)
}
