//! No import circle anywhere in the library: a test over the source tree.
//!
//! The graph has a node per file of `src/`: a `foo.rs` or `foo/mod.rs` and each file of its
//! submodules (`foo/bar.rs`) are nodes of their own, and an inline module (`pub mod tag { .. }`)
//! belongs to its file. File A has an edge to file B when A's code names an item of B by a
//! path: `crate::..`, `super::..`, `self::..`, a submodule's name, or a name that a `use`
//! brought in (the `use` itself counts). So a submodule that uses its parent's items has an
//! edge to its parent, and a parent that uses a submodule's items one to the submodule;
//! declaring `mod child;` is no edge.
//!
//! A path through a re-export counts for the file that defines the item. A module's re-export
//! of its own submodules' items (a parent's `mod.rs` re-exporting a child) is no edge unless the
//! module's code uses the name as well; any other re-export is an edge, as any `use` is.
//!
//! Left out: unit tests (`#[cfg(test)]` items, and the files of `#[cfg(test)] mod x;`), which
//! may drive any part of the library; comments, doc links and strings; and what is reached
//! through a value rather than a path (`x.method()`: a submodule's `impl` block of its parent's
//! type, called by the parent, is no edge).
//!
//! A circle is a cycle of edges through two or more files: each of them needs every other, so
//! none can be read, tested or changed on its own. The test fails on every circle, listing its
//! files and edges, except those that [`ALLOWED`] breaks; it also fails when an allowed edge is
//! gone, so that the list only shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Edges (from, to; files under `src/`) left out of the graph: none. A new circle is broken by
/// moving what both files need into a file beneath them (as `engine/error.rs`,
/// `engine/pass.rs` and `os/shadow_os.rs` were made), not by an entry here.
const ALLOWED: &[(&str, &str)] = &[];

/// One token of Rust source: an identifier or keyword, or one punctuation character (`::` is
/// one token), with its line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Token {
    text: String,
    line: usize,
}

/// The tokens of `src` that matter to paths: identifiers and punctuation, without comments,
/// string, byte and character literals, lifetimes and numbers.
fn tokens(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += (c[i] == '\n') as usize;
                    i += 1;
                }
            }
        } else if ch == '"' || ((ch == 'r' || ch == 'b') && raw_or_byte_string(&c, i).is_some()) {
            // A string: plain, byte, raw (`r#".."#`) or raw byte.
            let (start, hashes) = if ch == '"' { (i + 1, None) } else { raw_or_byte_string(&c, i).unwrap() };
            i = start;
            match hashes {
                None => {
                    while i < c.len() && c[i] != '"' {
                        line += (c[i] == '\n') as usize;
                        i += if c[i] == '\\' { 2 } else { 1 };
                    }
                    i += 1;
                }
                Some(n) => loop {
                    if i >= c.len() {
                        break;
                    }
                    if c[i] == '"' && (1..=n).all(|k| at(i + k) == '#') {
                        i += 1 + n;
                        break;
                    }
                    line += (c[i] == '\n') as usize;
                    i += 1;
                },
            }
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            // A character or byte literal, or a lifetime (`'a`, not closed after one character).
            let q = if ch == 'b' { i + 1 } else { i };
            if at(q + 1) == '\\' {
                i = q + 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(q + 2) == '\'' {
                i = q + 3;
            } else {
                i = q + 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || (c[i] == '.' && at(i + 1).is_ascii_digit()))
            {
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let mut s = i;
            if ch == 'r' && at(i + 1) == '#' && (at(i + 2).is_alphabetic() || at(i + 2) == '_') {
                s = i + 2;
            }
            i = s;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Token { text: c[s..i].iter().collect(), line });
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token { text: "::".into(), line });
            i += 2;
        } else {
            out.push(Token { text: ch.to_string(), line });
            i += 1;
        }
    }
    out
}

/// If a string literal with a prefix (`b"`, `r"`, `r#"`, `br#"`, ...) starts at `i`: where its
/// content starts, and the number of `#` of a raw string (`None` for a byte string).
fn raw_or_byte_string(c: &[char], i: usize) -> Option<(usize, Option<usize>)> {
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if at(j) == 'b' {
        j += 1;
        if at(j) == '"' {
            return Some((j + 1, None));
        }
    }
    if at(j) != 'r' {
        return None;
    }
    j += 1;
    let mut n = 0;
    while at(j) == '#' {
        n += 1;
        j += 1;
    }
    (at(j) == '"').then_some((j + 1, Some(n)))
}

/// A module path from the crate root (`["trace", "open"]`; empty for the root).
type ModPath = Vec<String>;

/// One `use` leaf: the path as written, the name it binds (`None` for a glob), and whether it
/// is a re-export.
#[derive(Debug)]
struct UseLeaf {
    path: Vec<String>,
    name: Option<String>,
    public: bool,
    line: usize,
}

/// What the parse of a file gathers.
#[derive(Default, Debug)]
struct FileFacts {
    /// Its module path.
    module: ModPath,
    /// Inline modules (`mod tests { .. }`, `pub mod tag { .. }`), as module paths.
    inline: Vec<ModPath>,
    /// Submodules declared (`mod x;` and inline ones), by the module that declares them.
    children: BTreeMap<ModPath, BTreeSet<String>>,
    /// `use` leaves, with the module they are in.
    uses: Vec<(ModPath, UseLeaf)>,
    /// Other paths that start with `crate`, `super`, `self` or another name that may be a
    /// module's, with the module they are in.
    paths: Vec<(ModPath, Vec<String>, usize)>,
    /// Names of the items at the top of the file (for glob re-exports).
    items: BTreeSet<String>,
    /// Submodules in files of their own that exist for tests only (`#[cfg(test)] mod x;`).
    test_children: BTreeSet<String>,
    /// Identifiers the file's code names by themselves (not after `.` or `::`), outside its
    /// `use` declarations.
    idents: BTreeSet<String>,
}

/// Parses the use trees of a `use` whose tree starts at token `i`; returns the leaves and the
/// index of the token after the closing `;`.
fn use_tree(
    t: &[Token],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>, usize)>,
) -> usize {
    let mut path: Vec<String> = prefix.to_vec();
    loop {
        let Some(tok) = t.get(i) else { return i };
        match tok.text.as_str() {
            "::" => i += 1,
            "{" => {
                i += 1;
                loop {
                    i = use_tree(t, i, &path, out);
                    match t.get(i).map(|t| t.text.as_str()) {
                        Some(",") => {
                            i += 1;
                            if t.get(i).is_some_and(|t| t.text == "}") {
                                return i + 1;
                            }
                        }
                        Some("}") => return i + 1,
                        _ => return i,
                    }
                }
            }
            "*" => {
                out.push((path, None, tok.line));
                return i + 1;
            }
            "as" => {
                let alias = t.get(i + 1).map(|t| t.text.clone()).unwrap_or_default();
                out.push((path, Some(alias), tok.line));
                return i + 2;
            }
            "," | "}" | ";" => {
                if path.len() > prefix.len() {
                    let name = if path.last().is_some_and(|s| s == "self") {
                        path.pop();
                        path.last().cloned()
                    } else {
                        path.last().cloned()
                    };
                    out.push((path, name, tok.line));
                }
                return i;
            }
            s if is_ident(s) => {
                path.push(s.to_string());
                i += 1;
            }
            _ => return i + 1,
        }
    }
}

/// The index after the bracketed group (`{..}`, `[..]` or `(..)`) that opens at `i`.
fn skip_group(t: &[Token], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < t.len() {
        match t[i].text.as_str() {
            "{" | "[" | "(" => depth += 1,
            "}" | "]" | ")" => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

fn is_ident(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Keywords that never start a path to a module.
const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in", "let",
    "loop", "match", "move", "mut", "pub", "ref", "return", "static", "struct", "trait", "true", "type", "unsafe",
    "use", "where", "while", "dyn", "Self",
];

/// Parses one file of module `module`.
fn parse(src: &str, module: ModPath) -> FileFacts {
    let t = tokens(src);
    let mut f = FileFacts { module: module.clone(), ..FileFacts::default() };
    // Inline modules open here: (module path, brace depth inside it).
    let mut stack: Vec<(ModPath, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let text = |i: usize| t.get(i).map(|t| t.text.as_str()).unwrap_or("");
    while i < t.len() {
        let cur = stack.last().map(|s| s.0.clone()).unwrap_or_else(|| module.clone());
        if text(i) == "#" && (i + 1..i + 7).map(text).eq(["[", "cfg", "(", "test", ")", "]"]) {
            // A unit test: skip the item (after any other attributes).
            i += 7;
            while text(i) == "#" && text(i + 1) == "[" {
                i = skip_group(&t, i + 1);
            }
            if text(i) == "pub" && text(i + 1) == "(" {
                i = skip_group(&t, i + 1);
            } else if text(i) == "pub" {
                i += 1;
            }
            if text(i) == "mod" && text(i + 2) == ";" {
                f.test_children.insert(text(i + 1).to_string());
            }
            while i < t.len() && text(i) != ";" && text(i) != "{" {
                i += 1;
            }
            if text(i) == "{" {
                i = skip_group(&t, i);
            } else {
                i += 1;
            }
            continue;
        }
        if is_ident(text(i)) && !matches!(text(i.wrapping_sub(1)), "." | "::") {
            f.idents.insert(text(i).to_string());
        }
        match text(i) {
            "{" => {
                depth += 1;
                i += 1;
            }
            "}" => {
                if stack.last().is_some_and(|s| s.1 == depth) {
                    stack.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            "mod" if is_ident(text(i + 1)) && text(i.wrapping_sub(1)) != "::" => {
                let name = text(i + 1).to_string();
                f.children.entry(cur.clone()).or_default().insert(name.clone());
                if depth == 0 {
                    f.items.insert(name.clone());
                }
                if text(i + 2) == "{" {
                    let mut m = cur.clone();
                    m.push(name);
                    f.inline.push(m.clone());
                    depth += 1;
                    stack.push((m, depth));
                    i += 3;
                } else {
                    i += 2;
                }
            }
            "pub" if text(i + 1) == "(" && text(i + 2) == "in" => {
                // `pub(in path)`: a visibility, not a use.
                while i < t.len() && text(i) != ")" {
                    i += 1;
                }
            }
            "use" if text(i.wrapping_sub(1)) != "::" => {
                let public = text(i.wrapping_sub(1)) == "pub" || text(i.wrapping_sub(1)) == ")";
                let mut leaves = Vec::new();
                let next = use_tree(&t, i + 1, &[], &mut leaves);
                for (path, name, line) in leaves {
                    if let Some(n) = name.as_ref().filter(|_| public && depth == 0) {
                        f.items.insert(n.clone());
                    }
                    f.uses.push((cur.clone(), UseLeaf { path, name, public, line }));
                }
                i = next.max(i + 1);
            }
            s if is_ident(s)
                && text(i + 1) == "::"
                && text(i.wrapping_sub(1)) != "::"
                && text(i.wrapping_sub(1)) != "$" =>
            {
                if KEYWORDS.contains(&s) {
                    i += 1;
                    continue;
                }
                let line = t[i].line;
                let mut path = vec![s.to_string()];
                let mut j = i + 1;
                while text(j) == "::" && is_ident(text(j + 1)) {
                    path.push(text(j + 1).to_string());
                    j += 2;
                }
                f.paths.push((cur, path, line));
                i = j;
            }
            "fn" | "struct" | "enum" | "const" | "static" | "type" | "trait" | "union" if depth == 0 => {
                if is_ident(text(i + 1)) {
                    f.items.insert(text(i + 1).to_string());
                }
                i += 2;
            }
            "macro_rules" if depth == 0 && text(i + 1) == "!" => {
                f.items.insert(text(i + 2).to_string());
                i += 3;
            }
            _ => i += 1,
        }
    }
    f
}

/// The files of the library and their modules.
fn files(src: &Path) -> Vec<(String, ModPath)> {
    fn walk(dir: &Path, src: &Path, out: &mut Vec<(String, ModPath)>) {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(dir).expect("src/ reads").map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, src, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
                let mut module: ModPath = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
                if module.last().is_some_and(|m| m == "mod" || m == "lib") {
                    module.pop();
                }
                out.push((rel, module));
            }
        }
    }
    let mut out = Vec::new();
    walk(src, src, &mut out);
    out
}

/// An edge of the graph, with where it was seen (line, and the path as written).
#[derive(Clone, Debug)]
struct Edge {
    from: String,
    to: String,
    line: usize,
    path: String,
}

/// Everything parsed, and how to resolve a path to the file that defines it.
struct Crate {
    facts: BTreeMap<String, FileFacts>,
    /// Module path -> file (file modules and inline ones).
    file_of: BTreeMap<ModPath, String>,
    /// (module, name) -> the path a re-export of that name points at.
    reexports: BTreeMap<(ModPath, String), ModPath>,
    /// Module -> the modules it re-exports everything of.
    globs: BTreeMap<ModPath, Vec<ModPath>>,
    /// File -> (name -> full path) of its `use`s.
    aliases: BTreeMap<String, BTreeMap<String, ModPath>>,
}

impl Crate {
    fn new(src: &Path) -> Crate {
        let mut c = Crate {
            facts: BTreeMap::new(),
            file_of: BTreeMap::new(),
            reexports: BTreeMap::new(),
            globs: BTreeMap::new(),
            aliases: BTreeMap::new(),
        };
        for (rel, module) in files(src) {
            let text = std::fs::read_to_string(src.join(&rel)).expect("a source file reads");
            let f = parse(&text, module.clone());
            c.file_of.insert(module, rel.clone());
            for m in &f.inline {
                c.file_of.insert(m.clone(), rel.clone());
            }
            c.facts.insert(rel, f);
        }
        // Files of unit tests (`#[cfg(test)] mod tests;`) are no part of the library.
        let tests: Vec<ModPath> = c
            .facts
            .values()
            .flat_map(|f| f.test_children.iter().map(|n| [f.module.clone(), vec![n.clone()]].concat()))
            .collect();
        for m in tests {
            if let Some(rel) = c.file_of.remove(&m) {
                c.facts.remove(&rel);
            }
        }
        let mut reexports = Vec::new();
        let mut globs = Vec::new();
        let mut aliases = Vec::new();
        for (rel, f) in &c.facts {
            for (m, u) in &f.uses {
                let Some(abs) = c.absolute(rel, m, &u.path, false) else { continue };
                match (&u.name, u.public) {
                    (Some(n), true) => {
                        reexports.push(((m.clone(), n.clone()), abs.clone()));
                        aliases.push((rel.clone(), n.clone(), abs));
                    }
                    (Some(n), false) => aliases.push((rel.clone(), n.clone(), abs)),
                    (None, true) => globs.push((m.clone(), abs)),
                    (None, false) => {}
                }
            }
        }
        for (k, v) in reexports {
            c.reexports.insert(k, v);
        }
        for (m, target) in globs {
            c.globs.entry(m).or_default().push(target);
        }
        for (rel, n, abs) in aliases {
            c.aliases.entry(rel).or_default().insert(n, abs);
        }
        c
    }

    /// The path from the crate root that `path`, written in module `m` of file `rel`, names;
    /// `None` for a path outside the crate (`std::..`, another crate's). With `aliases`, a
    /// first segment that a `use` of the file brought in is replaced by what it names.
    fn absolute(&self, rel: &str, m: &ModPath, path: &[String], aliases: bool) -> Option<ModPath> {
        let first = path.first()?;
        let mut abs: ModPath;
        let rest: &[String];
        match first.as_str() {
            "crate" => {
                abs = Vec::new();
                rest = &path[1..];
            }
            "self" => {
                abs = m.clone();
                rest = &path[1..];
            }
            "super" => {
                abs = m.clone();
                let n = path.iter().take_while(|s| *s == "super").count();
                for _ in 0..n {
                    abs.pop()?;
                }
                rest = &path[n..];
            }
            name => {
                let f = &self.facts[rel];
                let child = f.children.get(m).is_some_and(|c| c.contains(name));
                if child {
                    abs = m.clone();
                    rest = path;
                } else if let Some(a) = aliases.then(|| self.aliases.get(rel).and_then(|a| a.get(name))).flatten() {
                    abs = a.clone();
                    rest = &path[1..];
                } else {
                    return None;
                }
            }
        }
        abs.extend(rest.iter().cloned());
        Some(abs)
    }

    /// The file that defines what the absolute path `abs` names, following re-exports.
    fn resolve(&self, abs: &ModPath) -> Option<String> {
        let mut abs = abs.clone();
        for _ in 0..16 {
            let n = (0..=abs.len()).rev().find(|&n| self.file_of.contains_key(&abs[..n]))?;
            let module = abs[..n].to_vec();
            let Some(name) = abs.get(n) else { return self.file_of.get(&module).cloned() };
            if let Some(target) = self.reexports.get(&(module.clone(), name.clone())) {
                let mut next = target.clone();
                next.extend(abs[n + 1..].iter().cloned());
                if next == abs {
                    return self.file_of.get(&module).cloned();
                }
                abs = next;
                continue;
            }
            let via_glob = self.globs.get(&module).and_then(|targets| {
                targets.iter().find(|t| {
                    self.file_of.get(*t).is_some_and(|file| self.facts[file].items.contains(name) && **t != module)
                })
            });
            match via_glob {
                Some(t) => {
                    let mut next = t.clone();
                    next.extend(abs[n..].iter().cloned());
                    abs = next;
                }
                None => return self.file_of.get(&module).cloned(),
            }
        }
        None
    }

    /// Every edge between two files.
    fn edges(&self) -> Vec<Edge> {
        let mut out = Vec::new();
        for (rel, f) in &self.facts {
            let mut add = |m: &ModPath, path: &[String], line: usize, aliases: bool| {
                let Some(abs) = self.absolute(rel, m, path, aliases) else { return };
                let Some(to) = self.resolve(&abs) else { return };
                if &to != rel {
                    out.push(Edge { from: rel.clone(), to, line, path: path.join("::") });
                }
            };
            for (m, u) in &f.uses {
                // A re-export of the module's own submodules' items is no edge, unless the
                // module's code uses the name too.
                let own = u.public
                    && self
                        .absolute(rel, m, &u.path, false)
                        .is_some_and(|abs| abs.len() > m.len() && abs.starts_with(m))
                    && !u.name.as_ref().is_some_and(|n| f.idents.contains(n));
                if !own {
                    add(m, &u.path, u.line, false);
                }
            }
            for (m, p, line) in &f.paths {
                add(m, p, *line, true);
            }
        }
        out
    }
}

/// The circles of the graph `edges`: the groups of two or more files that each reach every
/// other (its strongly connected components), each sorted, in sorted order.
fn circles(edges: &[(String, String)]) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        next.entry(a).or_default().push(b);
        next.entry(b).or_default();
    }
    // What each file reaches: a search from each (the graph is small).
    let reach: BTreeMap<&str, BTreeSet<&str>> = next
        .keys()
        .map(|&v| {
            let (mut seen, mut todo) = (BTreeSet::new(), vec![v]);
            while let Some(u) = todo.pop() {
                for &w in &next[u] {
                    if seen.insert(w) {
                        todo.push(w);
                    }
                }
            }
            (v, seen)
        })
        .collect();
    let mut out = BTreeSet::new();
    for (&v, r) in &reach {
        let group: Vec<String> = r.iter().filter(|&&w| reach[w].contains(v)).map(|w| w.to_string()).collect();
        if group.len() > 1 {
            out.insert(group);
        }
    }
    out.into_iter().collect()
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_circle() {
    let c = Crate::new(&src_dir());
    let edges = c.edges();
    let mut problems = Vec::new();
    for (from, to) in ALLOWED {
        if !edges.iter().any(|e| e.from == *from && e.to == *to) {
            problems.push(format!("allowed edge {from} -> {to} is gone: take it off ALLOWED"));
        }
    }
    let kept: BTreeSet<(String, String)> = edges
        .iter()
        .filter(|e| !ALLOWED.contains(&(e.from.as_str(), e.to.as_str())))
        .map(|e| (e.from.clone(), e.to.clone()))
        .collect();
    let kept: Vec<(String, String)> = kept.into_iter().collect();
    for circle in circles(&kept) {
        let mut m = format!("import circle between {}:", circle.join(", "));
        for e in &edges {
            if circle.contains(&e.from)
                && circle.contains(&e.to)
                && !ALLOWED.contains(&(e.from.as_str(), e.to.as_str()))
            {
                m.push_str(&format!("\n    {} -> {}  ({}:{}: {})", e.from, e.to, e.from, e.line, e.path));
            }
        }
        problems.push(m);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Prints every edge (`cargo test -p xlat --lib module_graph -- --ignored --nocapture`).
#[test]
#[ignore]
fn print_edges() {
    let c = Crate::new(&src_dir());
    let mut seen = BTreeSet::new();
    for e in c.edges() {
        if seen.insert((e.from.clone(), e.to.clone())) {
            println!("{} -> {}  ({}: {})", e.from, e.to, e.line, e.path);
        }
    }
}

/// A crate of `files` (path under `src/`, text) written to a directory of its own, and the
/// circles the test finds in it.
fn circles_of(name: &str, files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let dir = std::env::temp_dir().join(format!("xlat-module-graph-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let c = Crate::new(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let edges: BTreeSet<(String, String)> = c.edges().into_iter().map(|e| (e.from, e.to)).collect();
    circles(&edges.into_iter().collect::<Vec<_>>())
}

#[test]
fn the_rules_of_the_graph() {
    let lib = "pub mod a;\npub mod c;\n";
    // A submodule that uses its parent's items, and a parent that uses the submodule's: a
    // circle, whether the parent names the item by a path or through its own re-export.
    let child = "use super::Z;\npub struct X;\n";
    for parent in ["mod b;\npub struct Z;\nfn f(_: b::X) {}\n", "mod b;\npub use b::X;\npub struct Z;\nfn f(_: X) {}\n"]
    {
        let found = circles_of("used", &[("lib.rs", lib), ("a/mod.rs", parent), ("a/b.rs", child), ("c.rs", "")]);
        assert_eq!(found, vec![vec!["a/b.rs".to_string(), "a/mod.rs".to_string()]], "{parent}");
    }
    // A parent that only declares and re-exports the submodule, names in comments, doc links
    // and strings, and a unit test: no circle.
    let parent = "//! [`crate::a::b::X`]\nmod b;\npub use b::X;\npub struct Z;\n\
                  fn f() -> &'static str { \"b::X super::Z\" } // b::X\n\
                  #[cfg(test)]\nmod tests {\n    use super::b::X;\n}\n";
    assert!(
        circles_of("reexported", &[("lib.rs", lib), ("a/mod.rs", parent), ("a/b.rs", child), ("c.rs", "")]).is_empty()
    );
    // Through another file, and through a re-export of another module's item: a circle of three.
    let a = "pub use crate::c::Y;\npub struct Z;\n";
    let c = "pub struct Y;\nfn g(_: crate::a::b::X) {}\n";
    let found =
        circles_of("three", &[("lib.rs", lib), ("a/mod.rs", &format!("mod b;\n{a}")), ("a/b.rs", child), ("c.rs", c)]);
    assert_eq!(found, vec![vec!["a/b.rs".to_string(), "a/mod.rs".to_string(), "c.rs".to_string()]]);
}
