//! `xlat._xlat`: the native half of the xlat Python package. The Python half (`python/xlat`)
//! wraps it into the documented API; everything here returns plain values or JSON text, and
//! every long call runs with the GIL released.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
use serde_json::Value;
use std::path::{Path, PathBuf};
use xlat::sweep::{self, Design, Store, Sweep, WorkloadSource};
use xlat::trace::{self, TraceWriter};

create_exception!(xlat, XlatError, PyException, "Every error of xlat: one line saying what and where.");
create_exception!(xlat, ConfigError, XlatError, "A design, parameter or sweep file that cannot be used.");
create_exception!(xlat, TraceError, XlatError, "A trace that cannot be read or written.");
create_exception!(xlat, SimulationError, XlatError, "A simulation that could not complete.");
create_exception!(xlat, TracerError, XlatError, "A program that could not be traced.");

fn config_err(e: impl std::fmt::Display) -> PyErr {
    ConfigError::new_err(e.to_string())
}
fn trace_err(e: impl std::fmt::Display) -> PyErr {
    TraceError::new_err(e.to_string())
}
fn sim_err(e: impl std::fmt::Display) -> PyErr {
    SimulationError::new_err(e.to_string())
}

/// A Python int, float, bool or str as a TOML value.
fn to_toml(v: &Bound<'_, PyAny>, path: &str) -> PyResult<toml::Value> {
    if v.is_instance_of::<PyBool>() {
        Ok(toml::Value::Boolean(v.extract()?))
    } else if v.is_instance_of::<PyInt>() {
        let i: i64 = v.extract().map_err(|_| config_err(format!("'{path}': {v} does not fit in 64 bits")))?;
        Ok(toml::Value::Integer(i))
    } else if v.is_instance_of::<PyFloat>() {
        Ok(toml::Value::Float(v.extract()?))
    } else if v.is_instance_of::<PyString>() {
        Ok(toml::Value::String(v.extract()?))
    } else {
        // numpy scalars and the like: through their int or float value.
        if let Ok(i) = v.call_method0("__index__").and_then(|i| i.extract::<i64>()) {
            return Ok(toml::Value::Integer(i));
        }
        if let Ok(f) = v.call_method0("__float__").and_then(|f| f.extract::<f64>()) {
            return Ok(toml::Value::Float(f));
        }
        Err(config_err(format!(
            "'{path}': expected an int, float, bool or str, got {}",
            v.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        )))
    }
}

fn toml_to_py(py: Python<'_>, v: &toml::Value) -> PyResult<Py<PyAny>> {
    let json = sweep::toml_to_json(v).to_string();
    let loads = py.import("json")?.getattr("loads")?;
    Ok(loads.call1((json,))?.unbind())
}

/// One design: a preset or a TOML config, with parameters settable by dotted path.
#[pyclass(name = "Design", module = "xlat", from_py_object)]
#[derive(Clone)]
struct PyDesign {
    inner: Design,
}

#[pymethods]
impl PyDesign {
    /// A built-in preset (`xlat.presets()` lists them).
    #[staticmethod]
    fn preset(name: &str) -> PyResult<PyDesign> {
        Ok(PyDesign { inner: Design::preset(name).map_err(config_err)? })
    }

    /// A design from TOML text, or from a TOML file's path (a str without a newline or `=`, or
    /// a path object).
    #[staticmethod]
    fn from_toml(text_or_path: &Bound<'_, PyAny>) -> PyResult<PyDesign> {
        if let Ok(s) = text_or_path.extract::<String>() {
            if s.contains('\n') || s.contains('=') {
                return Ok(PyDesign { inner: Design::from_toml(&s, "<text>").map_err(config_err)? });
            }
        }
        let path: PathBuf = text_or_path.extract()?;
        Ok(PyDesign { inner: Design::from_file(&path).map_err(config_err)? })
    }

    /// Sets a parameter by dotted path (`tlb.0.entries`); the design must stay valid. Returns
    /// the design, so calls can be chained.
    fn set<'py>(mut slf: PyRefMut<'py, Self>, path: &str, value: &Bound<'py, PyAny>) -> PyResult<PyRefMut<'py, Self>> {
        let v = to_toml(value, path)?;
        slf.inner.set(path, v).map_err(config_err)?;
        Ok(slf)
    }

    /// The value at a dotted path, or None if the design does not set it (a default applies).
    fn get(&self, py: Python<'_>, path: &str) -> PyResult<Option<Py<PyAny>>> {
        self.inner.get(path).map(|v| toml_to_py(py, v)).transpose()
    }

    /// A copy, to change without changing this one.
    fn copy(&self) -> PyDesign {
        self.clone()
    }

    /// The design as TOML text (keys in a fixed order).
    fn to_toml(&self) -> String {
        self.inner.to_toml()
    }

    /// The design's name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }

    fn __repr__(&self) -> String {
        format!("Design({:?})", self.inner.name())
    }

    fn __eq__(&self, other: &PyDesign) -> bool {
        self.inner.to_toml() == other.inner.to_toml()
    }
}

/// The names of the built-in presets.
#[pyfunction]
fn presets() -> Vec<String> {
    xlat::config::PRESETS.iter().map(|(n, _)| n.to_string()).collect()
}

/// Simulates designs over a trace in one pass; the JSON text `xlat run --json` writes.
#[pyfunction]
#[pyo3(signature = (designs, trace, max_refs=None))]
fn run(py: Python<'_>, designs: Vec<PyDesign>, trace: PathBuf, max_refs: Option<u64>) -> PyResult<String> {
    let configs = designs.iter().map(|d| d.inner.config()).collect::<Result<Vec<_>, _>>().map_err(config_err)?;
    let systems = sweep::systems(&configs).map_err(config_err)?;
    let path = trace.display().to_string();
    py.detach(|| {
        // Opened once (a named pipe can be read only once), with the GIL released from here on.
        let (mut reader, format) = trace::open::open_reader_inline(&path, None).map_err(trace_err)?;
        sweep::run_systems(&path, reader.as_mut(), format, systems, max_refs, |_| {}).map_err(sim_err)
    })
    .map(|doc| doc.to_string())
}

/// Simulates designs given as TOML texts over a trace (a Ray task's work): the designs' results
/// as a JSON list.
#[pyfunction]
#[pyo3(signature = (trace, designs, max_refs=None))]
fn run_group(py: Python<'_>, trace: PathBuf, designs: Vec<String>, max_refs: Option<u64>) -> PyResult<String> {
    let configs = designs
        .iter()
        .map(|t| Design::from_toml(t, "<sweep point>").and_then(|d| d.config()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(config_err)?;
    let path = trace.display().to_string();
    let doc = py.detach(|| sweep::run_designs(&path, &configs, max_refs, |_| {})).map_err(sim_err)?;
    Ok(doc["configs"].to_string())
}

/// A trace's summary (`xlat info --json`), as JSON text.
#[pyfunction]
fn info(py: Python<'_>, trace: PathBuf) -> PyResult<String> {
    let path = trace.display().to_string();
    py.detach(|| {
        let mut reader = trace::open::open_reader(&path, None).map_err(trace_err)?;
        let i = trace::info::info(reader.as_mut()).map_err(trace_err)?;
        serde_json::to_string(&i).map_err(trace_err)
    })
}

/// Runs a program under a tracer and writes its references to an `.xtr` file; the counts as
/// JSON text.
#[pyfunction]
#[pyo3(signature = (cmd, out, backend="qemu", children=false))]
fn trace_program(py: Python<'_>, cmd: Vec<String>, out: PathBuf, backend: &str, children: bool) -> PyResult<String> {
    use xlat::tracer::{self, Backend, ProgramOutput, TraceSpec};
    if cmd.is_empty() {
        return Err(TracerError::new_err("no command to trace"));
    }
    let backend = Backend::from_name(backend)
        .ok_or_else(|| TracerError::new_err(format!("unknown backend '{backend}': expected qemu or lackey")))?;
    let out_name = out.display().to_string();
    if trace::open::format_from_name(&out_name).is_some_and(|f| f != trace::Format::Xtr) {
        return Err(TracerError::new_err(format!(
            "{out_name}: xlat.trace writes xtr (name it OUT.xtr; `xlat convert` makes other formats)"
        )));
    }
    let spec = TraceSpec {
        command: cmd.iter().map(Into::into).collect(),
        backend,
        children,
        quantum: tracer::DEFAULT_QUANTUM,
        stdout: ProgramOutput::Inherit,
    };
    py.detach(|| -> PyResult<String> {
        let output = xlat::output::Output::start(&out_name, "");
        let partial = output.path().to_string_lossy().into_owned();
        let opts = trace::xtr::XtrOptions {
            metadata: vec![
                ("command".to_string(), cmd.join(" ")),
                ("backend".to_string(), backend.name().to_string()),
                ("quantum".to_string(), spec.quantum.to_string()),
            ],
            ..trace::xtr::XtrOptions::default()
        };
        let mut writer = trace::xtr::XtrWriter::with_options(
            trace::open::create_output(&partial).map_err(trace_err)?,
            &out_name,
            opts,
        )
        .map_err(trace_err)?;
        let mut reader = tracer::spawn(&spec).map_err(|e| TracerError::new_err(e.to_string()))?;
        let (copied, outcome) = reader.copy_into(&mut writer);
        copied.map_err(trace_err)?;
        outcome.write_notes(&mut writer).map_err(trace_err)?;
        Box::new(writer).finish().map_err(trace_err)?;
        output.commit().map_err(|e| trace_err(format!("{out_name}: cannot write: {e}")))?;
        let s = outcome.stats;
        Ok(serde_json::json!({
            "trace": out_name,
            "references": s.by_kind.iter().sum::<u64>(),
            "by_kind": { "ifetch": s.by_kind[0], "load": s.by_kind[1], "store": s.by_kind[2], "modify": s.by_kind[3] },
            "events": s.events,
            "processes": s.processes,
            "exit_status": outcome.status_text(),
        })
        .to_string())
    })
}

/// One curve: (page size, lookups, entries, ways, misses), one element per point.
type CurveLists = (u64, u64, Vec<u32>, Vec<u32>, Vec<u64>);

/// Miss curves in one pass (`xlat curve`): the trace's counts as JSON text (the `trace` object
/// of `xlat curve --json`) and one curve per page size.
#[pyfunction]
#[pyo3(signature = (trace, entries, ways, policy, page_sizes, sample=None, max_refs=None))]
#[allow(clippy::too_many_arguments)]
fn curve(
    py: Python<'_>,
    trace: PathBuf,
    entries: Option<&str>,
    ways: &str,
    policy: &str,
    page_sizes: Vec<u64>,
    sample: Option<f64>,
    max_refs: Option<u64>,
) -> PyResult<(String, Vec<CurveLists>)> {
    use xlat::curve::{self, CurveSpec};
    let (entries, entries_range) = match entries {
        Some(e) => curve::parse_entries(e).map_err(config_err)?,
        None => curve::default_entries(),
    };
    let mut sizes = Vec::new();
    for p in page_sizes {
        if !sizes.contains(&p) {
            sizes.push(p);
        }
    }
    let spec = CurveSpec {
        entries,
        entries_range,
        ways: curve::parse_ways(ways).map_err(config_err)?,
        policy: curve::parse_policy(policy).map_err(config_err)?,
        page_sizes: sizes,
        sample,
        max_refs,
        seed: 1,
    };
    spec.pairs().map_err(config_err)?;
    let path = trace.display().to_string();
    py.detach(|| {
        let (mut reader, format) = trace::open::open_reader_inline(&path, None).map_err(trace_err)?;
        let r = curve::curve(reader.as_mut(), &spec, |_| {}).map_err(|e| match e {
            curve::CurveError::Trace(e) => trace_err(e),
            e => sim_err(e),
        })?;
        let t = &r.trace;
        if t.references == 0 {
            return Err(sim_err(format!(
                "{path}: the trace holds no memory references ({} records skipped, {} events): nothing to simulate",
                r.reader.skipped, t.events
            )));
        }
        let info = r.trace_json(&path, format.name());
        let curves = r
            .curves
            .iter()
            .map(|c| {
                (
                    c.page_size,
                    c.lookups,
                    c.points.iter().map(|p| p.entries).collect(),
                    c.points.iter().map(|p| p.ways).collect(),
                    c.points.iter().map(|p| p.misses).collect(),
                )
            })
            .collect();
        Ok((info.to_string(), curves))
    })
}

/// A parsed sweep and the store of its finished points (the driver's side of `xlat.sweep`).
#[pyclass(name = "SweepPlan", module = "xlat")]
struct PySweep {
    sweep: Sweep,
    store: Store,
}

fn workload_source() -> WorkloadSource<'static> {
    WorkloadSource {
        manifest: (sweep::MANIFEST, "workloads/manifest.toml (built in)"),
        default_dir: &sweep::default_workloads_dir,
        on_build: &|name| eprintln!("xlat.sweep: building workload {name}"),
    }
}

#[pymethods]
impl PySweep {
    /// Parses a sweep from TOML text (`file` names it in errors; paths are relative to
    /// `base_dir`), its points kept under `out`.
    #[new]
    fn new(py: Python<'_>, text: String, file: String, base_dir: PathBuf, out: PathBuf) -> PyResult<PySweep> {
        let sweep = py.detach(|| Sweep::from_toml(&text, &file, &base_dir, &workload_source())).map_err(config_err)?;
        Ok(PySweep { sweep, store: Store::new(&out) })
    }

    /// Number of (trace, point) rows.
    fn __len__(&self) -> usize {
        self.sweep.points.len() * self.sweep.traces.len()
    }

    /// The missing points as tasks: (trace path, [design TOML], [key], max_refs, trace index,
    /// [point index]).
    #[allow(clippy::type_complexity)]
    fn tasks(
        &self,
        jobs: usize,
        group: usize,
    ) -> Vec<(String, Vec<String>, Vec<String>, Option<u64>, usize, Vec<usize>)> {
        self.sweep
            .tasks(&self.store, jobs, group)
            .into_iter()
            .map(|t| {
                let designs = t.points.iter().map(|&p| self.sweep.points[p].design.to_toml()).collect();
                let path = self.sweep.traces[t.trace].path.display().to_string();
                (path, designs, t.keys, self.sweep.max_refs, t.trace, t.points)
            })
            .collect()
    }

    /// Runs one task here (GIL released) and stores its points.
    fn run_task(&self, py: Python<'_>, trace: usize, points: Vec<usize>, keys: Vec<String>) -> PyResult<()> {
        let task = sweep::Task { trace, points, keys };
        py.detach(|| self.sweep.run_task(&task, &self.store)).map_err(sim_err)
    }

    /// Stores a task's results computed elsewhere (`run_group`'s JSON list).
    fn store(&self, trace: usize, points: Vec<usize>, keys: Vec<String>, results: &str) -> PyResult<()> {
        let task = sweep::Task { trace, points, keys };
        let results: Vec<Value> =
            serde_json::from_str(results).map_err(|e| sim_err(format!("bad results from a worker: {e}")))?;
        if results.len() != task.points.len() {
            return Err(sim_err("bad results from a worker: wrong number of designs"));
        }
        for (key, rec) in task.keys.iter().zip(self.sweep.records(&task, &results)) {
            self.store.put(key, &rec).map_err(sim_err)?;
        }
        Ok(())
    }

    /// The table: (columns, rows as JSON text).
    fn table(&self) -> (Vec<String>, String) {
        let (columns, rows) = self.sweep.table(&self.store);
        (columns, Value::from(rows.into_iter().map(Value::from).collect::<Vec<_>>()).to_string())
    }

    /// Writes the table as CSV (as `xlat sweep` does).
    fn write_csv(&self, path: PathBuf) -> PyResult<()> {
        let (columns, rows) = self.sweep.table(&self.store);
        write_atomically(&path, sweep::table_csv(&columns, &rows).as_bytes())
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> PyResult<()> {
    use std::io::Write;
    let name = path.display().to_string();
    let o = xlat::output::Output::start(&name, "");
    o.create().and_then(|mut f| f.write_all(bytes)).map_err(|e| trace_err(format!("{name}: cannot write: {e}")))?;
    o.commit().map_err(|e| trace_err(format!("{name}: cannot write: {e}")))
}

/// Writes a grouped bar chart (the engine's `xlat::plot::BarChart`) as SVG or PNG, by the
/// path's extension.
#[pyfunction]
fn bar_chart(
    title: String,
    x_label: String,
    y_label: String,
    categories: Vec<String>,
    series: Vec<(String, Vec<Option<f64>>)>,
    path: PathBuf,
) -> PyResult<()> {
    use xlat::plot::{BarChart, Series};
    let chart = BarChart {
        title,
        x_label,
        y_label,
        categories,
        series: series.into_iter().map(|(name, values)| Series { name, values }).collect(),
        y_max: None,
        reference: None,
    };
    let r = match path.extension().and_then(|e| e.to_str()) {
        Some("png") => chart.write_png(&path),
        Some("svg") => chart.write_svg(&path),
        _ => return Err(ConfigError::new_err(format!("{}: expected a .svg or .png file name", path.display()))),
    };
    r.map_err(|e| XlatError::new_err(e.to_string()))
}

#[pymodule]
fn _xlat(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("XlatError", py.get_type::<XlatError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("SimulationError", py.get_type::<SimulationError>())?;
    m.add("TracerError", py.get_type::<TracerError>())?;
    m.add_class::<PyDesign>()?;
    m.add_class::<PySweep>()?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(run_group, m)?)?;
    m.add_function(wrap_pyfunction!(info, m)?)?;
    m.add_function(wrap_pyfunction!(curve, m)?)?;
    m.add_function(wrap_pyfunction!(trace_program, m)?)?;
    m.add_function(wrap_pyfunction!(bar_chart, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
