//! The `xlat` command: parse flags, build the systems, run, print. Every error is one line on
//! stderr and exit status 2.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use xlat::config::{Config, PRESETS};
use xlat::engine::{self, RunOptions, System};
use xlat::report::{self, ReportInput};
use xlat::trace::{self, Format, TraceReader};

/// `println!` that reports a failed write (a full disk) as an error instead of panicking. A
/// closed pipe never gets here: SIGPIPE ends the process quietly, as it does other Unix tools.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err($crate::stdout_error)?
    }};
}

/// `print!` that reports a failed write as an error (see `outln!`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*).map_err($crate::stdout_error)?
    }};
}

/// The error of a failed write to standard output.
pub(crate) fn stdout_error(e: std::io::Error) -> anyhow::Error {
    anyhow!("standard output: cannot write: {e}")
}

mod curve_cmd;
mod model_cmd;
mod reproduce_cmd;
mod snapshot_cmd;
mod sweep_cmd;
mod term;
mod trace_cmd;
mod workloads_cmd;

/// The most common commands, shown below the top-level help.
const COMMON_COMMANDS: &str = "\
Common commands:
  xlat demo                                  the bundled real trace through six contrasting designs
  xlat run --preset x86-64 --trace T.xtr     simulate designs over a trace (or `-- CMD ARGS` online)
  xlat trace -o T.xtr -- CMD ARGS            record a program's memory references with QEMU

Each command has its own help: `xlat COMMAND --help`. Documentation: README.md and docs/.";

/// xlat: a trace-driven simulator of TLBs, page tables and the OS policies around them.
#[derive(Parser)]
#[command(
    name = "xlat",
    version,
    about = "xlat: a trace-driven simulator of TLBs, page tables and the OS policies around them",
    long_about = None,
    after_help = COMMON_COMMANDS,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate one or more designs over a trace in one pass and compare them.
    Run(RunArgs),
    /// Run the bundled real trace through a few contrasting designs.
    Demo(DemoArgs),
    /// Misses of every TLB size and associativity in one pass over a trace (miss-ratio curve).
    Curve(curve_cmd::CurveArgs),
    /// Convert a trace between formats (lackey, xtr, champsim; gz/zst/xz compression).
    Convert(ConvertArgs),
    /// Summarise a trace: references by kind, distinct pages, processes, events.
    Info(InfoArgs),
    /// Generate a seeded synthetic trace.
    Gen(GenArgs),
    /// List the built-in presets, or print one as TOML.
    Presets(PresetsArgs),
    /// Record the mapped regions and resident pages of a process tree (at peak RSS, or now).
    Snapshot(snapshot_cmd::SnapshotArgs),
    /// talluri95's Table 2 formulas beside the simulated page tables built from the same pages.
    Model(model_cmd::ModelArgs),
    /// Run a program under a tracer (QEMU plugin or valgrind lackey) and write its references.
    Trace(trace_cmd::TraceArgs),
    /// Build or list the reproducible suite of real programs (`workloads/manifest.toml`).
    Workloads(workloads_cmd::WorkloadsArgs),
    /// Reproduce a paper's figures and claims on the workload suite (talluri95, chapman03, gray05,
    /// bala94, swanson98).
    Reproduce(reproduce_cmd::ReproduceArgs),
    /// Sweep a design space: parameters varied by path over traces, one table (CSV, Parquet).
    Sweep(sweep_cmd::SweepArgs),
}

#[derive(Args)]
struct RunArgs {
    /// A design as a TOML file (repeatable).
    #[arg(long = "config", short = 'c', value_name = "FILE")]
    configs: Vec<PathBuf>,
    /// A built-in design (repeatable; see `xlat presets`).
    #[arg(long = "preset", short = 'p', value_name = "NAME")]
    presets: Vec<String>,
    /// The trace file, or `-` for standard input.
    #[arg(long, short = 't', value_name = "TRACE", conflicts_with = "snapshot")]
    trace: Option<String>,
    /// An address-space snapshot (`xlat snapshot`) instead of a trace: build each design's page
    /// table from it and report its size.
    #[arg(long, value_name = "FILE")]
    snapshot: Option<String>,
    #[command(flatten)]
    tracer: trace_cmd::TracerArgs,
    /// Also write the records simulated online to this xtr file (for checking).
    #[arg(long, value_name = "OUT.xtr", hide = true, requires = "command")]
    tee: Option<String>,
    /// Simulate while this program runs (after `--`) instead of reading a trace.
    #[arg(last = true, value_name = "CMD", conflicts_with_all = ["trace", "snapshot"])]
    command: Vec<std::ffi::OsString>,
    #[command(flatten)]
    common: SimArgs,
}

#[derive(Args)]
struct SimArgs {
    /// Trace format.
    #[arg(long, default_value = "auto", value_parser = ["auto", "lackey", "xtr", "champsim"])]
    format: String,
    /// Write the results as JSON to this file (`-` for standard output).
    #[arg(long, value_name = "OUT.json")]
    json: Option<String>,
    /// Write the results as CSV to this file (`-` for standard output).
    #[arg(long, value_name = "OUT.csv")]
    csv: Option<String>,
    /// Stop after this many references.
    #[arg(long, value_name = "N")]
    max_refs: Option<u64>,
    /// Also print each core's rows for designs with several cores (`[cores] count > 1`).
    #[arg(long)]
    per_core: bool,
    /// No table on standard output and no progress bar.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Simulate the designs on up to N threads (default: every core); results do not depend on N.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
}

#[derive(Args)]
struct DemoArgs {
    #[command(flatten)]
    common: SimArgs,
}

#[derive(Args)]
struct ConvertArgs {
    /// Input trace (`-` for standard input).
    input: String,
    /// Output trace (`-` for standard output).
    output: String,
    /// Input format (default: inferred from the content or the name).
    #[arg(long, value_parser = ["lackey", "xtr", "champsim"])]
    from: Option<String>,
    /// Output format (default: inferred from the name).
    #[arg(long, value_parser = ["lackey", "xtr", "champsim"])]
    to: Option<String>,
}

#[derive(Args)]
struct InfoArgs {
    /// The trace (`-` for standard input).
    trace: String,
    /// Trace format.
    #[arg(long, default_value = "auto", value_parser = ["auto", "lackey", "xtr", "champsim"])]
    format: String,
    /// Write the summary as JSON to this file (`-` for standard output, instead of the text).
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
    /// Only count records by kind (fast: skips distinct pages and address ranges).
    #[arg(long)]
    quick: bool,
    /// No progress line on standard error.
    #[arg(long, short = 'q')]
    quiet: bool,
}

#[derive(Args)]
struct GenArgs {
    /// Output trace (format from the name; `.xtr` by default).
    #[arg(long, short = 'o', value_name = "OUT")]
    output: String,
    /// Address pattern.
    #[arg(long, default_value = "uniform", value_parser = ["sequential", "strided", "uniform", "zipf", "mix"])]
    pattern: String,
    /// Number of references.
    #[arg(long, default_value_t = 1_000_000)]
    refs: u64,
    /// Footprint in bytes (suffixes K, M, G allowed).
    #[arg(long, default_value = "1M", value_parser = parse_bytes)]
    footprint: u64,
    /// Stride in bytes for the strided pattern (suffixes allowed).
    #[arg(long, default_value = "4K", value_parser = parse_bytes)]
    stride: u64,
    /// Zipf exponent (zipf, and the Zipf bursts of mix).
    #[arg(long, default_value_t = 1.0)]
    zipf_s: f64,
    /// Mean references per burst of the mix pattern (bursts of sequential, strided and Zipf
    /// references, each burst's pattern drawn at random).
    #[arg(long, default_value_t = 1000)]
    burst: u64,
    /// Bytes per access.
    #[arg(long, default_value_t = 8)]
    access_size: u32,
    /// Fraction of accesses that are stores.
    #[arg(long, default_value_t = 0.0)]
    store_fraction: f64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
struct PresetsArgs {
    /// Print this preset's TOML.
    #[arg(long, value_name = "NAME")]
    show: Option<String>,
}

pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("expected a byte count like 4096, 64K, 1M or 2G, got '{s}'"))
}

fn main() {
    // A closed pipe (`xlat presets | head -1`) ends xlat quietly with SIGPIPE, as it does other
    // Unix tools, instead of an error on every later write. Rust ignores SIGPIPE by default.
    // SAFETY: setting a signal's disposition to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    remove_partial_files_on_signals();
    // A panic is a bug in xlat, but the user still gets one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if xlat::engine::contain::active() {
            // One design's simulation panicked: the engine fails that design and goes on.
            if let Some(l) = info.location() {
                xlat::engine::contain::note(format!("{}:{}", l.file(), l.line()));
            }
            return;
        }
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let _ = writeln!(std::io::stderr(), "xlat: internal error{at}: {}", msg.replace('\n', " "));
        std::process::exit(101);
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand { 2 } else { 0 });
            }
            // clap's message is several lines (error, its details, usage, hint): keep the error
            // and its details on one line.
            let text = e.to_string();
            let msg: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            let msg = msg.join(" ");
            let msg = msg.trim_start_matches("error: ");
            let _ = writeln!(std::io::stderr(), "xlat: error: {msg}{} (see `{}`)", positional_hint(&e), help_command());
            std::process::exit(2);
        }
    };
    // Whatever is still buffered must reach standard output too, or the run is an error.
    let done = dispatch(cli).and_then(|()| std::io::stdout().flush().map_err(stdout_error));
    if let Err(e) = done {
        // One line: the chain of causes joined, never a backtrace.
        let msg = format!("{e:#}").replace('\n', " ");
        let _ = writeln!(std::io::stderr(), "xlat: error: {msg}");
        std::process::exit(2);
    }
}

/// On SIGINT or SIGTERM, removes the partial output files being written (`xlat::output`), then
/// dies of the signal as it would have. (`xlat snapshot -- CMD` installs its own handlers while
/// it watches the command, to write the snapshot taken so far.)
fn remove_partial_files_on_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            xlat::output::remove_partials();
            let _ = signal_hook::low_level::emulate_default_handler(sig);
            std::process::exit(128 + sig);
        }
    });
}

/// For a word where the subcommand takes no positional argument (`xlat run T.xtr`, `xlat trace
/// -o T.xtr ls`), how to write what it likely means: `--trace T.xtr`, or the program after `--`.
fn positional_hint(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use clap::CommandFactory;
    if e.kind() != ErrorKind::UnknownArgument {
        return String::new();
    }
    let Some(ContextValue::String(word)) = e.get(ContextKind::InvalidArg) else {
        return String::new();
    };
    if word.starts_with('-') {
        return String::new();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = Cli::command();
    let Some((at, sub)) = args
        .iter()
        .enumerate()
        .find(|(_, a)| !a.starts_with('-'))
        .and_then(|(i, n)| Some((i, cmd.find_subcommand(n)?)))
    else {
        return String::new();
    };
    let takes_trace = sub.get_arguments().any(|a| a.get_long() == Some("trace"));
    let takes_program = sub.get_arguments().any(|a| a.is_last_set());
    match (takes_trace, takes_program) {
        (true, true) => {
            format!("; to read a trace write `--trace {word}`, to run a program put it after `--` (`-- CMD ARGS`)")
        }
        (true, false) => format!("; to read a trace write `--trace {word}`"),
        (false, true) => {
            let Some(w) = args.iter().skip(at + 1).position(|a| a == word) else {
                return String::new();
            };
            let mut line = vec!["xlat".to_string()];
            line.extend(args[..at + 1 + w].iter().cloned());
            line.push("--".into());
            line.extend(args[at + 1 + w..].iter().cloned());
            format!("; did you mean `{}`?", line.join(" "))
        }
        (false, false) => String::new(),
    }
}

/// The help to point a command-line error to: the subcommand's if one was named.
fn help_command() -> String {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let sub = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    match sub.filter(|a| cmd.get_subcommands().any(|c| c.get_name() == a)) {
        Some(name) => format!("xlat {name} --help"),
        None => "xlat --help".to_string(),
    }
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(a) => cmd_run(a),
        Command::Demo(a) => cmd_demo(a),
        Command::Curve(a) => curve_cmd::cmd_curve(a),
        Command::Convert(a) => cmd_convert(a),
        Command::Info(a) => cmd_info(a),
        Command::Gen(a) => cmd_gen(a),
        Command::Presets(a) => cmd_presets(a),
        Command::Snapshot(a) => snapshot_cmd::cmd_snapshot(a),
        Command::Model(a) => model_cmd::cmd_model(a),
        Command::Trace(a) => trace_cmd::cmd_trace(a),
        Command::Workloads(a) => workloads_cmd::cmd_workloads(a),
        Command::Reproduce(a) => reproduce_cmd::cmd_reproduce(a),
        Command::Sweep(a) => sweep_cmd::cmd_sweep(a),
    }
}

pub(crate) fn format_arg(s: &str) -> Option<Format> {
    Format::from_name(s)
}

fn cmd_run(a: RunArgs) -> Result<()> {
    let mut inputs: Vec<&Path> = a.configs.iter().map(PathBuf::as_path).collect();
    inputs.extend(a.trace.iter().chain(&a.snapshot).map(Path::new));
    refuse_overwriting_inputs(&[a.common.json.as_deref(), a.common.csv.as_deref()], &inputs)?;
    if !a.command.is_empty() {
        return trace_cmd::run_online(&a.configs, &a.presets, &a.tracer, &a.command, a.tee.as_deref(), &a.common);
    }
    let Some(trace_path) = a.trace.clone() else {
        let Some(snap) = a.snapshot.as_deref() else {
            bail!(
                "nothing to simulate: give --trace FILE (`-` for standard input), --snapshot FILE or -- CMD ARGS \
                 (see `xlat run --help`)"
            );
        };
        return snapshot_cmd::run_snapshot(snap, &a.configs, &a.presets, &a.common);
    };
    let configs = load_designs(&a.configs, &a.presets)?;
    let (mut reader, format) = trace::open::open_reader_inline(&trace_path, format_arg(&a.common.format))?;
    simulate(&configs, reader.as_mut(), &trace_path, format.name(), &a.common)
}

/// The designs named by `--config` files and `--preset` names, in that order; at least one.
pub(crate) fn load_designs(config_files: &[PathBuf], presets: &[String]) -> Result<Vec<Config>> {
    let mut configs = Vec::new();
    for p in config_files {
        configs.push(Config::from_file(p)?);
    }
    for p in presets {
        configs.push(Config::preset(p)?);
    }
    if configs.is_empty() {
        bail!("no design given: add --config FILE or --preset NAME (see `xlat presets`)");
    }
    Ok(configs)
}

fn simulate(
    configs: &[Config],
    reader: &mut dyn TraceReader,
    trace_path: &str,
    format: &str,
    common: &SimArgs,
) -> Result<()> {
    // Names must be unique so that columns and JSON entries can be told apart.
    for (i, c) in configs.iter().enumerate() {
        if configs[..i].iter().any(|o| o.name == c.name) {
            bail!("two designs are named '{}': give each config a distinct `name`", c.name);
        }
    }
    let mut systems = configs
        .iter()
        .map(|c| System::new(c).map_err(|e| anyhow!("config '{}': {e}", c.name)))
        .collect::<Result<Vec<_>>>()?;
    let bar = term::progress(common.quiet, "{spinner} {elapsed} {human_pos} references read, {msg}");
    let designs = format!("{} design{} simulated", systems.len(), if systems.len() == 1 { "" } else { "s" });
    if let Some(b) = &bar {
        b.set_message(designs.clone());
    }
    let start = Instant::now();
    let opts = RunOptions { max_refs: common.max_refs };
    let mut throttle = term::Throttle::new();
    let jobs =
        common.jobs.map(|j| j as usize).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let summary = engine::run_jobs(reader, &mut systems, opts, jobs, |n| {
        if let Some(b) = &bar {
            b.set_position(n);
            // The rate text changes a few times a second, not per batch.
            if throttle.due() {
                let rate = n as f64 / start.elapsed().as_secs_f64().max(1e-9) / 1e6;
                b.set_message(format!("{designs} ({rate:.1} M references/s)"));
            }
        }
    })?;
    let seconds = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if summary.trace.references == 0 {
        bail!(
            "{trace_path}: the trace holds no memory references ({} records skipped, {} events): nothing to simulate",
            summary.reader.skipped,
            summary.trace.events
        );
    }
    for e in reader.notes().untraced_execs {
        let (pid, path) = e.split_once(' ').unwrap_or(("?", &e));
        eprintln!(
            "xlat: warning: {trace_path}: process {pid} exec'd {path}, which was not traced: the trace lacks its references"
        );
    }
    if summary.trace.clipped_accesses > 0 {
        eprintln!(
            "xlat: warning: {trace_path}: {} access{} run past the top of the 64-bit address space; each was simulated up to its last page (trace.clipped_accesses)",
            summary.trace.clipped_accesses,
            if summary.trace.clipped_accesses == 1 { "" } else { "es" }
        );
    }
    let input = ReportInput { trace_path, format, summary: &summary, seconds };
    let failed: Vec<String> =
        systems.iter().filter_map(|s| s.failure().map(|f| report::failure_message(&input, f))).collect();
    if failed.len() == systems.len() {
        // Nothing completed: no report at all, only why.
        match failed.len() {
            1 => bail!("{}", failed[0]),
            n => bail!("all {n} designs failed: {}", failed.join("; ")),
        }
    }
    if let Some(path) = &common.json {
        let doc = serde_json::to_string_pretty(&report::json(&input, &systems))? + "\n";
        write_output(path, &doc)?;
    }
    if let Some(path) = &common.csv {
        write_output(path, &report::csv(&input, &systems))?;
    }
    let to_stdout = common.json.as_deref() == Some("-") || common.csv.as_deref() == Some("-");
    if !common.quiet && !to_stdout {
        out!("{}", report::table(&input, &systems, term::stdout_width()));
        if common.per_core {
            out!("{}", report::per_core_table(&systems));
        }
        eprintln!(
            "simulated {} design{}{} over {} lookups in {:.2} s ({:.1} M lookups/s for all designs together)",
            systems.len(),
            if systems.len() == 1 { "" } else { "s" },
            if failed.is_empty() { String::new() } else { format!(" ({} failed)", failed.len()) },
            summary.trace.lookups,
            seconds,
            (summary.trace.lookups * systems.len() as u64) as f64 / seconds.max(1e-9) / 1e6
        );
    }
    // The designs that could simulate the trace are reported above; the run still fails so that
    // scripts notice the others.
    match failed.len() {
        0 => Ok(()),
        n => bail!("{n} of {} designs failed, the others are reported: {}", systems.len(), failed.join("; ")),
    }
}

pub(crate) fn write_output(path: &str, text: &str) -> Result<()> {
    if path == "-" {
        return std::io::stdout().write_all(text.as_bytes()).map_err(stdout_error);
    }
    let out = xlat::output::Output::start(path, "");
    out.create()
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|()| out.commit())
        .with_context(|| format!("{path}: cannot write"))
}

/// Refuses outputs that would overwrite one of the command's inputs (`--json t.xtr` over the
/// trace being read), before anything is read or written.
pub(crate) fn refuse_overwriting_inputs(outputs: &[Option<&str>], inputs: &[&Path]) -> Result<()> {
    for out in outputs.iter().flatten().filter(|o| **o != "-") {
        if let Some(input) = inputs.iter().find(|i| xlat::output::same_file(Path::new(out), i)) {
            bail!("{out}: an output cannot overwrite an input of the command ({})", input.display());
        }
    }
    Ok(())
}

/// The bundled demo trace (see `data/README.md` for how it was made).
const DEMO_TRACE: &[u8] = include_bytes!("../../../data/demo.xtr");
const DEMO_NAME: &str = "data/demo.xtr (bundled)";

fn demo_configs() -> Result<Vec<Config>> {
    let text = |name: &str, entries: u32, ways: u32, policy: &str, kind: &str| {
        format!(
            "name = \"{name}\"\n[[tlb]]\nname = \"L1\"\nentries = {entries}\nways = {ways}\npolicy = \"{policy}\"\n[page_table]\nkind = \"{kind}\"\n"
        )
    };
    let mut v = vec![
        Config::from_toml(&text("fa16-lru-radix", 16, 16, "lru", "radix"), "demo")?,
        Config::from_toml(&text("fa64-lru-radix", 64, 64, "lru", "radix"), "demo")?,
        Config::from_toml(&text("fa64-fifo-hashed", 64, 64, "fifo", "hashed"), "demo")?,
        Config::from_toml(&text("sa64x4-clustered", 64, 4, "lru", "clustered"), "demo")?,
    ];
    v.push(Config::preset("x86-64")?);
    // The R3000's organisation (64 entries, random replacement, 8 reserved for page-table
    // pages, software-refilled linear table) over a 48-bit address space: the preset itself is
    // 32-bit and rejects this 64-bit trace's addresses.
    let mut r3000 = Config::preset("mips-r3000")?;
    r3000.name = "r3000-like-linear".to_string();
    r3000.page_table.va_bits = 48;
    v.push(r3000);
    Ok(v)
}

fn cmd_demo(a: DemoArgs) -> Result<()> {
    let configs = demo_configs()?;
    let stream = Box::new(std::io::Cursor::new(DEMO_TRACE));
    let (mut reader, _) =
        trace::open::reader_from_stream(stream, DEMO_NAME, Some(Format::Xtr), Some(DEMO_TRACE.len() as u64), false)?;
    let to_stdout = a.common.json.as_deref() == Some("-") || a.common.csv.as_deref() == Some("-");
    if !a.common.quiet && !to_stdout {
        outln!("xlat demo: a real program's memory trace (see data/README.md) through six designs.\n");
    }
    simulate(&configs, reader.as_mut(), DEMO_NAME, "xtr", &a.common)
}

fn cmd_convert(a: ConvertArgs) -> Result<()> {
    let from = a.from.as_deref().and_then(format_arg);
    // The output format comes from the final name, so give it explicitly to the temporary file.
    let to = a.to.as_deref().and_then(format_arg).or_else(|| trace::open::format_from_name(&a.output));
    let stats = if a.output == "-" {
        trace::open::convert(&a.input, "-", from, to)?
    } else {
        if xlat::output::same_file(Path::new(&a.input), Path::new(&a.output)) {
            bail!("{}: output is the same file as the input", a.output);
        }
        // Written next to the output and renamed on success (special files in place): a failed
        // or interrupted conversion leaves nothing.
        let suffix = match trace::open::Compression::from_name(&a.output) {
            trace::open::Compression::None => "",
            trace::open::Compression::Gzip => ".gz",
            trace::open::Compression::Zstd => ".zst",
            trace::open::Compression::Xz => ".xz",
            trace::open::Compression::Lz4 => ".lz4",
        };
        let out = xlat::output::Output::start(&a.output, suffix);
        // Long conversions (compressing to xz takes minutes) show that they are moving.
        let bar = term::progress(false, "{spinner} {elapsed} {human_pos} records converted");
        let stats = trace::open::convert_with_progress(&a.input, &out.path().to_string_lossy(), from, to, |n| {
            if let Some(b) = &bar {
                b.set_position(n);
            }
        });
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        let stats = stats?;
        out.commit().with_context(|| format!("{}: cannot write", a.output))?;
        stats
    };
    if a.output != "-" {
        eprintln!(
            "converted {} records ({} accesses, {} events) from {} to {}{}{}",
            stats.records,
            stats.accesses,
            stats.events,
            stats.from.name(),
            stats.to.name(),
            if stats.dropped_events > 0 {
                format!("; {} events dropped (the output format has none)", stats.dropped_events)
            } else {
                String::new()
            },
            if stats.input.skipped > 0 {
                format!("; {} input lines skipped", stats.input.skipped)
            } else {
                String::new()
            },
        );
    }
    Ok(())
}

fn cmd_info(a: InfoArgs) -> Result<()> {
    refuse_overwriting_inputs(&[a.json.as_deref()], &[Path::new(&a.trace)])?;
    let mut reader = trace::open::open_reader(&a.trace, format_arg(&a.format))?;
    let bar = term::progress(a.quiet, "{spinner} {elapsed} {human_pos} records read");
    let mut counting = term::Counting::new(reader.as_mut(), bar.as_ref());
    let info = if a.quick {
        quick_count(&a.trace, &mut counting, a.json.as_deref(), bar.as_ref())
    } else {
        trace::info::info(&mut counting).map_err(Into::into).and_then(|info| {
            if let Some(b) = &bar {
                b.finish_and_clear();
            }
            if let Some(path) = &a.json {
                write_output(path, &(serde_json::to_string_pretty(&info)? + "\n"))?;
            }
            if a.json.as_deref() != Some("-") {
                print_info(&a.trace, &info)?;
            }
            Ok(())
        })
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    info
}

fn quick_count(
    path: &str,
    reader: &mut dyn TraceReader,
    json: Option<&str>,
    bar: Option<&indicatif::ProgressBar>,
) -> Result<()> {
    let start = Instant::now();
    let (mut by_kind, mut events) = ([0u64; 4], 0u64);
    let mut buf = Vec::with_capacity(trace::BATCH);
    while reader.read_batch(&mut buf, trace::BATCH)? > 0 {
        for r in &buf {
            match r {
                trace::Record::Access { kind, .. } => by_kind[*kind as usize] += 1,
                _ => events += 1,
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let refs: u64 = by_kind.iter().sum();
    let bytes = reader.stats().bytes;
    if let Some(out) = json {
        let doc = serde_json::json!({
            "trace": path, "references": refs, "events": events, "seconds": seconds,
            "input_bytes": bytes,
            "by_kind": { "ifetch": by_kind[0], "load": by_kind[1], "store": by_kind[2], "modify": by_kind[3] },
        });
        write_output(out, &(serde_json::to_string_pretty(&doc)? + "\n"))?;
    }
    if json != Some("-") {
        outln!("trace            {path}");
        outln!(
            "references       {refs} (ifetch {}, load {}, store {}, modify {})",
            by_kind[0],
            by_kind[1],
            by_kind[2],
            by_kind[3]
        );
        outln!("events           {events}");
        outln!(
            "read in          {seconds:.3} s ({:.1} M records/s, {:.1} MB/s of decompressed input)",
            (refs + events) as f64 / seconds.max(1e-9) / 1e6,
            bytes as f64 / seconds.max(1e-9) / 1e6
        );
    }
    Ok(())
}

fn print_info(path: &str, i: &trace::info::TraceInfo) -> Result<()> {
    outln!("trace            {path}");
    outln!("records          {}", i.records);
    outln!(
        "references       {} (ifetch {}, load {}, store {}, modify {})",
        i.references,
        i.by_kind.get(trace::Kind::Ifetch),
        i.by_kind.get(trace::Kind::Load),
        i.by_kind.get(trace::Kind::Store),
        i.by_kind.get(trace::Kind::Modify)
    );
    outln!("bytes accessed   {}", i.bytes_accessed);
    outln!("distinct pages   {} (4 KB; footprint {} KB)", i.distinct_pages, i.footprint_bytes >> 10);
    outln!("processes        {} (ASIDs {:?})", i.processes, i.asids);
    outln!("events           {}", i.events.total());
    if i.threads > 0 {
        outln!("threads          {} (thread records: {})", i.threads, i.events.thread);
    }
    let e = &i.events;
    if e.map + e.unmap + e.protect + e.discard > 0 {
        outln!("address space    {} maps, {} unmaps, {} protects, {} discards", e.map, e.unmap, e.protect, e.discard);
    }
    if i.events.ipc > 0 || i.events.syscall > 0 {
        outln!("ipc messages     {} (between traced processes)", i.events.ipc);
        outln!("system calls     {}", i.events.syscall);
    }
    for e in &i.untraced_execs {
        let (pid, path) = e.split_once(' ').unwrap_or(("?", e));
        outln!("untraced exec    process {pid} exec'd {path}: its references are not in the trace");
    }
    if !i.objects.is_empty() {
        outln!(
            "objects          {} mapped (files and shared memory; maps naming them: {})",
            i.objects.len(),
            i.events.object
        );
        for (id, path, n) in &i.objects {
            let path = if path.is_empty() { "(not named in the trace)" } else { path };
            outln!("  object {id:<6} {n:>4} maps  {path}");
        }
    }
    if let (Some(lo), Some(hi)) = (i.min_addr, i.max_addr) {
        outln!("address range    {lo:#x} - {hi:#x}");
    }
    if i.skipped > 0 {
        outln!("skipped          {} input lines or records", i.skipped);
    }
    Ok(())
}

fn cmd_gen(a: GenArgs) -> Result<()> {
    use trace::gen::{GenSpec, Generator, Pattern};
    let pattern = Pattern::from_name(&a.pattern).ok_or_else(|| anyhow!("unknown pattern '{}'", a.pattern))?;
    if a.footprint == 0 {
        bail!("--footprint must be at least 1 byte");
    }
    if a.access_size == 0 {
        bail!("--access-size must be at least 1 byte");
    }
    if !(0.0..=1.0).contains(&a.store_fraction) {
        bail!("--store-fraction must be between 0 and 1, got {}", a.store_fraction);
    }
    let spec = GenSpec {
        pattern,
        refs: a.refs,
        footprint: a.footprint,
        stride: a.stride,
        zipf_s: a.zipf_s,
        burst: a.burst,
        seed: a.seed,
        access_size: a.access_size,
        store_fraction: a.store_fraction,
    };
    let mut gen = Generator::new(spec)?;
    let format = trace::open::format_from_name(&a.output).unwrap_or(Format::Xtr);
    let mut writer = trace::open::create_writer(&a.output, Some(format))?;
    let mut buf = Vec::with_capacity(trace::BATCH);
    while gen.read_batch(&mut buf, trace::BATCH)? > 0 {
        writer.write(&buf)?;
    }
    writer.finish()?;
    Ok(())
}

fn cmd_presets(a: PresetsArgs) -> Result<()> {
    if let Some(name) = a.show {
        let Some((_, text)) = PRESETS.iter().find(|(n, _)| *n == name) else {
            return Err(Config::preset(&name).expect_err("not a preset").into());
        };
        out!("{text}");
        return Ok(());
    }
    // The name column is as wide as the longest name.
    let w = PRESETS.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, _) in PRESETS {
        let c = Config::preset(name)?;
        outln!("{name:<w$} {}", c.description);
        outln!("{:<w$} source: {}", "", c.source);
    }
    Ok(())
}
