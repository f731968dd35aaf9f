//! Every console example in README.md and docs/ is run and its output compared, so the
//! documentation cannot drift from what xlat prints.
//!
//! In each Markdown file (README.md, docs/*.md, data/README.md, workloads/README.md), in order:
//! - a ```` ```toml ```` block whose first line is `# NAME.toml` is written to `NAME.toml`, so the
//!   examples can use the config files the document shows;
//! - a ```` ```console ```` block is a session: each `$ COMMAND` line (continued by a trailing
//!   `\`) runs under `sh -c` and the lines after it, up to the next `$ `, are what it must print:
//!   standard output, then standard error, then `[exit status N]` if it is not 0.
//!
//! Commands of one document run one after another in a scratch directory holding links to the
//! repository's `data/` and `configs/`, with the `xlat` under test first on the PATH. In the
//! expected text, `[..]` matches any part of a line (timings) and a line `...` any number of
//! lines. `XLAT_BLESS=1 cargo test -p xlat-cli --test cli doc_examples` rewrites mismatching examples
//! with what the commands print now (keeping the expected lines whose wildcards still match), for
//! a person to review with `git diff`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The Markdown files whose examples are checked.
fn documents() -> Vec<PathBuf> {
    let root = repo();
    let mut docs = vec![root.join("README.md"), root.join("data/README.md"), root.join("workloads/README.md")];
    let mut more: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// One `$ COMMAND` of a console block and the lines it must print.
struct Example {
    command: String,
    expected: Vec<String>,
    /// Line range of the expected text in the document (0-based, end exclusive).
    lines: std::ops::Range<usize>,
}

/// What the document asks for, in order.
enum Step {
    File(String, String),
    Run(Example),
}

fn parse(text: &str) -> Vec<Step> {
    let lines: Vec<&str> = text.lines().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].trim_start().strip_prefix("```") else {
            i += 1;
            continue;
        };
        let lang = lang.trim().to_string();
        let start = i + 1;
        let mut end = start;
        while end < lines.len() && !lines[end].trim_start().starts_with("```") {
            end += 1;
        }
        let body = &lines[start..end];
        match lang.as_str() {
            "toml" => {
                if let Some(name) = body.first().and_then(|l| l.strip_prefix("# ")).filter(|n| n.ends_with(".toml")) {
                    steps.push(Step::File(name.trim().to_string(), body.join("\n") + "\n"));
                }
            }
            "console" => {
                let mut k = 0;
                assert!(body.first().is_some_and(|l| l.starts_with("$ ")), "a console block must start with `$ `");
                while k < body.len() {
                    let mut command = body[k].strip_prefix("$ ").unwrap().to_string();
                    k += 1;
                    while command.ends_with('\\') && k < body.len() {
                        command.pop();
                        command.push_str(body[k]);
                        k += 1;
                    }
                    let first = k;
                    while k < body.len() && !body[k].starts_with("$ ") {
                        k += 1;
                    }
                    steps.push(Step::Run(Example {
                        command,
                        expected: body[first..k].iter().map(|l| l.to_string()).collect(),
                        lines: start + first..start + k,
                    }));
                }
            }
            _ => {}
        }
        i = end + 1;
    }
    steps
}

/// True if `line` matches `pattern`, where `[..]` in the pattern matches any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || !line[first.len()..].ends_with(last) || line.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    true
}

/// True if `lines` match `expected`, where an expected line `...` matches any number of lines.
fn matches(expected: &[String], lines: &[String]) -> bool {
    match expected.split_first() {
        None => lines.is_empty(),
        Some((e, rest)) if e == "..." => (0..=lines.len()).any(|k| matches(rest, &lines[k..])),
        Some((e, rest)) => lines.first().is_some_and(|l| line_matches(e, l)) && matches(rest, &lines[1..]),
    }
}

fn run(example: &Example, dir: &Path) -> Vec<String> {
    let bin = Path::new(env!("CARGO_BIN_EXE_xlat")).parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(&example.command)
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("XDG_CACHE_HOME")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
    match out.status.code() {
        Some(0) => {}
        Some(n) => lines.push(format!("[exit status {n}]")),
        None => lines.push("[killed by a signal]".to_string()),
    }
    lines
}

#[test]
fn console_examples_print_what_the_docs_show() {
    let bless = std::env::var_os("XLAT_BLESS").is_some();
    let mut failures = Vec::new();
    let mut examples = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let steps = parse(&text);
        if !steps.iter().any(|s| matches!(s, Step::Run(_))) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        for link in ["data", "configs"] {
            std::os::unix::fs::symlink(repo().join(link), dir.path().join(link)).unwrap();
        }
        let mut doc_lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut edits = Vec::new();
        for step in &steps {
            match step {
                Step::File(name, body) => std::fs::write(dir.path().join(name), body).unwrap(),
                Step::Run(ex) => {
                    examples += 1;
                    let expected: Vec<String> = ex.expected.iter().map(|l| l.trim_end().to_string()).collect();
                    let got = run(ex, dir.path());
                    if matches(&expected, &got) {
                        continue;
                    }
                    let name = doc.strip_prefix(repo()).unwrap().display().to_string();
                    failures.push(format!(
                        "{name}:{}: `{}` printed\n{}\nbut the document shows\n{}",
                        ex.lines.start,
                        ex.command,
                        got.join("\n"),
                        expected.join("\n")
                    ));
                    let blessed: Vec<String> = got
                        .iter()
                        .enumerate()
                        .map(|(i, g)| match expected.get(i) {
                            Some(e) if e.contains("[..]") && line_matches(e, g) => e.clone(),
                            _ => g.clone(),
                        })
                        .collect();
                    edits.push((ex.lines.clone(), blessed));
                }
            }
        }
        if bless && !edits.is_empty() {
            for (range, new) in edits.into_iter().rev() {
                doc_lines.splice(range, new);
            }
            std::fs::write(&doc, doc_lines.join("\n") + "\n").unwrap();
        }
    }
    assert!(examples > 0, "no console example found");
    assert!(
        failures.is_empty(),
        "{} of {examples} documented examples differ (XLAT_BLESS=1 rewrites them):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn wildcards_match_as_documented() {
    let v = |s: &[&str]| s.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert!(line_matches("in [..] s ([..] M/s)", "in 0.02 s (3.1 M/s)"));
    assert!(!line_matches("in [..] s", "in 0.02 ms"));
    assert!(!line_matches("a[..]a", "a"));
    assert!(matches(&v(&["a", "...", "z"]), &v(&["a", "b", "c", "z"])));
    assert!(matches(&v(&["a", "...", "z"]), &v(&["a", "z"])));
    assert!(!matches(&v(&["a", "z"]), &v(&["a", "b", "z"])));
    assert!(!matches(&v(&["a"]), &v(&["a", "[exit status 2]"])));
}
