"""The API against the `xlat` command: presets, designs, runs, info, trace, errors."""

import json
import shutil
import tomllib
from pathlib import Path

import pandas as pd
import pytest

import xlat


def test_presets_are_the_commands(cli):
    names = [line.split()[0] for line in cli("presets").stdout.splitlines() if line and not line[0].isspace()]
    assert xlat.presets() == names
    assert "x86-64" in names


def test_a_preset_is_the_commands_toml(cli):
    for name in xlat.presets():
        d = xlat.Design.preset(name)
        assert d.name == name
        assert tomllib.loads(d.to_toml()) == tomllib.loads(cli("presets", "--show", name).stdout)


def test_set_and_get_by_path():
    d = xlat.Design.preset("x86-64")
    assert d.get("tlb.1.entries") == 64
    assert d.set("tlb.1.entries", 128).set("page_table.kind", "hashed") is d
    assert d.get("tlb.1.entries") == 128 and d.get("page_table.kind") == "hashed"
    assert d.get("stlb.entries") is None
    d.set("stlb.entries", 1024)
    assert tomllib.loads(d.to_toml())["stlb"] == {"entries": 1024}
    e = d.copy().set("tlb.1.entries", 8)
    assert d.get("tlb.1.entries") == 128 and e.get("tlb.1.entries") == 8
    assert e != d and e.copy() == e


@pytest.mark.parametrize(
    "path,value,message",
    [
        ("tlb.1.entriez", 8, "unknown parameter 'tlb.1.entriez'"),
        ("tlb.9.entries", 8, "cannot set 'tlb.9.entries': 'tlb' has 3 entries"),
        ("tlb.1.entries", 0, "'tlb.1.entries' = 0"),
        ("tlb.1.entries", "many", "'tlb.1.entries' = \"many\""),
        ("tlb.x.entries", 8, "expected an index"),
        ("tlb.1.entries", [1], "expected an int, float, bool or str"),
    ],
)
def test_a_bad_parameter_is_a_config_error_and_changes_nothing(path, value, message):
    d = xlat.Design.preset("x86-64")
    before = d.to_toml()
    with pytest.raises(xlat.ConfigError, match=None) as e:
        d.set(path, value)
    assert message in str(e.value)
    assert "\n" not in str(e.value)
    assert isinstance(e.value, xlat.XlatError)
    assert d.to_toml() == before


def test_from_toml_text_file_and_path(tmp_path, cli):
    text = cli("presets", "--show", "x86-64").stdout.replace('name = "x86-64"', 'name = "mine"')
    f = tmp_path / "mine.toml"
    f.write_text(text)
    a, b, c = xlat.Design.from_toml(text), xlat.Design.from_toml(str(f)), xlat.Design.from_toml(f)
    assert a == b == c and a.name == "mine"


def test_config_errors_carry_the_commands_message(tmp_path, cli, repo):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "b"\n[[tlb]]\nname = "L1"\nentries = 0\n')
    with pytest.raises(xlat.ConfigError) as e:
        xlat.Design.from_toml(bad)
    assert str(e.value) == cli.error("run", "-c", bad, "-t", repo / "data/demo.xtr")
    with pytest.raises(xlat.ConfigError) as e:
        xlat.Design.preset("x86")
    assert str(e.value) == cli.error("run", "-p", "x86", "-t", repo / "data/demo.xtr")
    with pytest.raises(xlat.ConfigError):
        xlat.Design.from_toml(tmp_path / "missing.toml")


def test_run_is_the_commands_json(traces, cli):
    d = xlat.Design.preset("x86-64").set("tlb.1.entries", 16).set("name", "small-dtlb")
    cfg = traces / "small.toml"
    cfg.write_text(d.to_toml())
    for trace in ("demo.xtr", "sort-400.lackey.zst"):
        r = xlat.run([d, "x86-64", xlat.Design.preset("mips-r3000")], traces / trace)
        doc = cli.json("run", "-c", cfg, "-p", "x86-64", "-p", "mips-r3000", "-t", traces / trace, "--json", "-")
        assert r.designs == doc["configs"]
        assert r.trace == doc["trace"]
        assert r.complete and len(r) == 3
        assert r["small-dtlb"]["tlb"][1]["entries"] == 16
        df = r.to_pandas()
        assert list(df["name"]) == ["small-dtlb", "x86-64", "mips-r3000"]
        for i, design in enumerate(doc["configs"]):
            flat = xlat.flatten(design)
            for col, v in flat.items():
                got = df.loc[i, col]
                assert (pd.isna(got) and v is None) or got == v, (design["name"], col)
        for col in ("tlb.0.misses", "walks.count", "page_table.bytes", "cycles.total"):
            assert col in df.columns


def test_max_refs(traces, cli):
    r = xlat.run("x86-64", traces / "demo.xtr", max_refs=1000)
    doc = cli.json("run", "-p", "x86-64", "-t", traces / "demo.xtr", "--max-refs", "1000", "--json", "-")
    assert r.designs == doc["configs"] and r.trace["references"] == 1000


def test_run_errors(traces, cli):
    with pytest.raises(xlat.TraceError) as e:
        xlat.run("x86-64", traces / "nope.xtr")
    assert str(e.value) == cli.error("run", "-p", "x86-64", "-t", traces / "nope.xtr")
    with pytest.raises(xlat.ConfigError):
        xlat.run(["x86-64", "x86-64"], traces / "demo.xtr")
    with pytest.raises(xlat.ConfigError):
        xlat.run("nope", traces / "demo.xtr")
    empty = traces / "empty.lackey"
    empty.write_text("")
    with pytest.raises(xlat.SimulationError) as e:
        xlat.run("x86-64", empty)
    assert str(e.value) == cli.error("run", "-p", "x86-64", "-t", empty)


def test_info_is_the_commands(traces, cli):
    for t in ("demo.xtr", "sort-400.lackey.zst"):
        assert xlat.info(traces / t) == cli.json("info", traces / t, "--json", "-")
    with pytest.raises(xlat.TraceError):
        xlat.info(traces / "nope.xtr")


def test_trace_a_program(tmp_path, cli):
    if shutil.which("qemu-x86_64") is None:
        pytest.fail("qemu-x86_64 is missing: scripts/test.sh installs qemu-user")
    out = tmp_path / "true.xtr"
    counts = xlat.trace(["/bin/true"], out)
    assert out.exists() and counts["references"] > 1000 and counts["processes"] == 1
    info = cli.json("info", out, "--json", "-")
    assert info["references"] == counts["references"] == xlat.info(out)["references"]
    with pytest.raises(xlat.TracerError):
        xlat.trace([], out)
    with pytest.raises(xlat.TracerError):
        xlat.trace(["/bin/true"], tmp_path / "t.lackey")


GIL_CHECK = """
import os, sys, threading, xlat
fifo, trace, call = sys.argv[1], sys.argv[2], sys.argv[3]
got = {}
t = threading.Thread(target=lambda: got.update(r=getattr(xlat, call)(*(["x86-64"] if call == "run" else []), fifo)))
t.start()
# The call now waits for the trace on the pipe. This thread can write it only while the call
# has released the GIL; were it held, neither thread could go on (the test's timeout fails it).
with open(fifo, "wb") as f, open(trace, "rb") as src:
    while True:
        chunk = src.read(4096)
        if not chunk:
            break
        f.write(chunk)
t.join()
r = got["r"]
print(r.designs[0]["tlb"][0]["misses"] if call == "run" else r.trace["references"] if call == "curve" else r["references"])
"""


@pytest.mark.parametrize("call", ["run", "info", "curve"])
def test_long_calls_release_the_gil(tmp_path, cli, repo, call):
    import os
    import subprocess
    import sys

    fifo = tmp_path / "pipe.xtr"
    os.mkfifo(fifo)
    trace = repo / "data" / "demo.xtr"
    assert trace.stat().st_size > 2 * 65536, "bigger than a pipe's buffer: the writer must wait for the reader"
    r = subprocess.run([sys.executable, "-c", GIL_CHECK, str(fifo), str(trace), call],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    if call == "run":
        doc = cli.json("run", "-p", "x86-64", "-t", trace, "--json", "-")
        assert int(r.stdout) == doc["configs"][0]["tlb"][0]["misses"]
    else:
        assert int(r.stdout) == cli.json("info", trace, "--json", "-")["references"]


def test_the_stubs_ship_and_name_the_api():
    import ast
    import inspect
    import os

    pkg = Path(xlat.__file__).parent
    for f in ("__init__.pyi", "_xlat.pyi", "py.typed"):
        assert (pkg / f).exists(), f
    for stub, module in (("__init__.pyi", xlat), ("_xlat.pyi", xlat._xlat)):
        tree = ast.parse((pkg / stub).read_text())
        names, functions = set(), {}
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                names.add(node.name)
                if isinstance(node, ast.FunctionDef):
                    functions[node.name] = [a.arg for a in node.args.args]
            elif isinstance(node, ast.ImportFrom):
                names.update(a.asname or a.name for a in node.names)
            elif isinstance(node, ast.AnnAssign):
                names.add(node.target.id)
        public = set(module.__all__) if module is xlat else {n for n in dir(module) if not n.startswith("_")}
        assert public <= names, (stub, public - names)
        for name, args in functions.items():
            sig = list(inspect.signature(getattr(module, name)).parameters)
            assert sig == args, (stub, name, sig, args)
    assert os.fspath(pkg).endswith("xlat")


def test_run_takes_toml_paths_as_well_as_presets(traces, cli, monkeypatch):
    d = xlat.Design.preset("x86-64").set("tlb.1.entries", 16).set("name", "mine")
    (traces / "mine.toml").write_text(d.to_toml())
    (traces / "config").write_text(d.copy().set("name", "other").to_toml())
    monkeypatch.chdir(traces)
    r = xlat.run(["mine.toml", "x86-64", traces / "config"], "demo.xtr")
    assert [x["name"] for x in r] == ["mine", "x86-64", "other"]
    assert r.designs == xlat.run([d, "x86-64", d.copy().set("name", "other")], "demo.xtr").designs
    assert xlat.run("mine.toml", "demo.xtr").designs == r.designs[:1]
    doc = cli.json("run", "-c", "mine.toml", "-t", "demo.xtr", "--json", "-", cwd=traces)
    assert r.designs[0] == doc["configs"][0]
    with pytest.raises(xlat.ConfigError) as e:
        xlat.run("missing.toml", "demo.xtr")
    assert "missing.toml" in str(e.value)
    with pytest.raises(xlat.ConfigError) as e:
        xlat.run("mine", "demo.xtr")
    assert str(e.value).startswith("not a preset or a .toml file: 'mine'")
    with pytest.raises(xlat.ConfigError) as e:
        xlat.run("x86_64", "demo.xtr")
    assert "did you mean 'x86-64'" in str(e.value)


def test_the_namespace_holds_only_the_api():
    names = dir(xlat)
    for leaked in ("Any", "Dict", "List", "Optional", "Union", "os", "json", "re", "Path", "PathLike", "annotations"):
        assert leaked not in names, leaked
    public = {n for n in names if not n.startswith("_")}
    assert public == set(xlat.__all__) | {"plot"}, public ^ (set(xlat.__all__) | {"plot"})
    assert xlat.__version__ and xlat.Results.__module__ == "xlat" and xlat.run.__module__ == "xlat"
    plot_names = {n for n in dir(xlat.plot) if not n.startswith("_")}
    assert plot_names == set(xlat.plot.__all__) == {"plot_sweep"}, plot_names
