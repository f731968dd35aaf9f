"""xlat.sweep against `xlat sweep` and against separate runs of each design."""

import os
from pathlib import Path

import pandas as pd
import pytest

import xlat

SWEEP = """
base = "x86-64"
traces = ["demo.xtr", "sort-400.lackey.zst"]
[vary]
"tlb.1.entries" = [16, 64]
"page_table.kind" = ["radix", "hashed"]
[[zip]]
"tlb.0.entries" = [32, 128]
"tlb.0.ways" = [4, 8]
"""

PARAMS = ["tlb.1.entries", "page_table.kind", "tlb.0.entries", "tlb.0.ways"]


def point_files(out: Path):
    return sorted((out / "points").glob("*.json"))


def test_the_table_is_the_commands(traces, cli):
    (traces / "sweep.toml").write_text(SWEEP)
    df = xlat.sweep(traces / "sweep.toml", out=traces / "py", jobs=2, group=3, progress=False)
    cli("sweep", traces / "sweep.toml", "--out", traces / "cli", "--group", "2")
    assert list(df.columns[:7]) == ["trace", *PARAMS, "name", "status"]
    assert len(df) == 16 and (df["status"] == "ok").all()
    from_cli = pd.read_parquet(traces / "cli" / "results.parquet")
    pd.testing.assert_frame_equal(df, from_cli)
    pd.testing.assert_frame_equal(pd.read_parquet(traces / "py" / "results.parquet"), from_cli)
    assert (traces / "py" / "results.csv").read_text() == (traces / "cli" / "results.csv").read_text()


def test_each_row_is_a_run_of_its_design(traces):
    (traces / "sweep.toml").write_text(SWEEP)
    df = xlat.sweep(traces / "sweep.toml", progress=False)
    assert (traces / "sweep.out" / "results.csv").exists(), "NAME.out beside NAME.toml"
    for _, row in df.iterrows():
        d = xlat.Design.preset("x86-64")
        for p in PARAMS:
            v = row[p]
            d.set(p, v.item() if hasattr(v, "item") else v)
        d.set("name", row["name"])
        r = xlat.run(d, traces / row["trace"])
        for col, v in xlat.flatten(r.designs[0]).items():
            assert col in df.columns, col
            assert row[col] == v, (row["name"], row["trace"], col)


def test_a_dict_is_the_file(traces):
    (traces / "sweep.toml").write_text(SWEEP)
    from_file = xlat.sweep(traces / "sweep.toml", out=traces / "a", progress=False)
    spec = {
        "base": "x86-64",
        "traces": [traces / "demo.xtr", str(traces / "sort-400.lackey.zst")],
        "vary": {"tlb.1.entries": [16, 64], "page_table.kind": ["radix", "hashed"]},
        "zip": [{"tlb.0.entries": [32, 128], "tlb.0.ways": [4, 8]}],
    }
    from_dict = xlat.sweep(spec, out=traces / "b", progress=False)
    assert list(from_dict["trace"].unique()) == [str(traces / "demo.xtr"), str(traces / "sort-400.lackey.zst")]
    from_dict["trace"] = from_dict["trace"].map(lambda p: os.path.basename(p))
    pd.testing.assert_frame_equal(from_file, from_dict)
    # The same points: the keys are content hashes of design and trace, not of names or paths.
    assert [p.name for p in point_files(traces / "a")] == [p.name for p in point_files(traces / "b")]


def test_a_design_as_base(traces):
    base = xlat.Design.preset("mips-r3000").set("tlb.0.entries", 32)
    df = xlat.sweep(
        {"base": base, "traces": [traces / "demo.xtr"], "vary": {"tlb.0.policy": ["lru", "fifo", "random"]}},
        out=traces / "o",
        progress=False,
    )
    assert list(df["tlb.0.policy"]) == ["lru", "fifo", "random"]
    for i, policy in enumerate(["lru", "fifo", "random"]):
        r = xlat.run(base.copy().set("tlb.0.policy", policy).set("name", df["name"][i]), traces / "demo.xtr")
        # 32 entries, 8 of them reserved (wired) as in the preset: 24 for the policy.
        assert r.designs[0]["tlb"][0]["entries"] == 24
        for col, v in xlat.flatten(r.designs[0]).items():
            assert df.loc[i, col] == v, (policy, col)


def test_a_rerun_runs_nothing_and_a_lost_point_is_recomputed(traces):
    (traces / "sweep.toml").write_text(SWEEP)
    first = xlat.sweep(traces / "sweep.toml", out=traces / "o", progress=False)
    files = point_files(traces / "o")
    assert len(files) == 16
    stamps = {p: p.stat().st_mtime_ns for p in files}
    files[3].unlink()
    again = xlat.sweep(traces / "sweep.toml", out=traces / "o", progress=False)
    pd.testing.assert_frame_equal(first, again)
    changed = [p for p in point_files(traces / "o") if p.stat().st_mtime_ns != stamps.get(p)]
    assert changed == [files[3]], "only the lost point was computed"


def test_sweep_errors_are_the_commands(traces, cli):
    bad = traces / "bad.toml"
    bad.write_text('base = "x86-64"\ntraces = ["demo.xtr"]\n[vary]\n"tlb.0.entriez" = [1]\n')
    with pytest.raises(xlat.ConfigError) as e:
        xlat.sweep(bad, progress=False)
    assert str(e.value) == cli.error("sweep", bad)
    with pytest.raises(xlat.ConfigError):
        xlat.sweep({"base": "x86-64", "traces": [traces / "demo.xtr"], "vary": {"tlb.0.entries": [{}]}})
    with pytest.raises(xlat.ConfigError):
        xlat.sweep(traces / "missing.toml")


def test_the_module_runner(traces, cli):
    import subprocess
    import sys

    (traces / "sweep.toml").write_text(SWEEP)
    r = subprocess.run(
        [sys.executable, "-m", "xlat", "sweep", str(traces / "sweep.toml"), "--out", str(traces / "m"), "-q"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    cli("sweep", traces / "sweep.toml", "--out", traces / "c", "-q")
    assert (traces / "m" / "results.csv").read_text() == (traces / "c" / "results.csv").read_text()
    (traces / "bad.toml").write_text('base = "x86"\ntraces = ["demo.xtr"]\n')
    r = subprocess.run([sys.executable, "-m", "xlat", "sweep", str(traces / "bad.toml")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("xlat: error: ") and len(r.stderr.splitlines()) == 1, r.stderr


def test_plot_sweep(traces, tmp_path):
    (traces / "sweep.toml").write_text(SWEEP)
    df = xlat.sweep(traces / "sweep.toml", progress=False)
    sel = df[(df["page_table.kind"] == "radix") & (df["tlb.0.entries"] == 32)]
    pivot = xlat.plot_sweep(sel, "tlb.1.entries", "tlb.1.misses", path=tmp_path / "f.svg")
    assert list(pivot.index) == [16, 64] and list(pivot.columns) == ["demo.xtr", "sort-400.lackey.zst"]
    for _, row in sel.iterrows():
        assert pivot.loc[row["tlb.1.entries"], row["trace"]] == row["tlb.1.misses"]
    svg = (tmp_path / "f.svg").read_text()
    assert svg.startswith("<svg") and "sort-400.lackey.zst" in svg
    with pytest.raises(xlat.ConfigError):
        xlat.plot_sweep(df, "tlb.1.entries", "tlb.1.misses", path=tmp_path / "g.svg")


def test_a_killed_sweep_loses_no_finished_point(traces, cli):
    import signal
    import subprocess
    import sys
    import time

    cli("gen", "-o", traces / "big.xtr", "--refs", "300000", "--footprint", "256M", "--pattern", "uniform")
    (traces / "s.toml").write_text(
        'base = "x86-64"\ntraces = ["big.xtr"]\n[vary]\n"tlb.1.entries" = [4, 8, 16, 32, 64, 128, 256, 512]\n'
    )
    killed = traces / "killed"
    child = subprocess.Popen(
        [sys.executable, "-m", "xlat", "sweep", str(traces / "s.toml"), "--out", str(killed), "--jobs", "1",
         "--group", "1", "-q"]
    )
    try:
        while not point_files(killed) and child.poll() is None:
            time.sleep(0.005)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL, "killed before it finished (make the trace bigger if not)"
    done = {p: p.stat().st_mtime_ns for p in point_files(killed)}
    assert 1 <= len(done) < 8, done
    resumed = xlat.sweep(traces / "s.toml", out=killed, progress=False)
    assert len(point_files(killed)) == 8
    assert all(p.stat().st_mtime_ns == t for p, t in done.items()), "a finished point was computed again"
    cli("sweep", traces / "s.toml", "--out", traces / "whole", "-q")
    pd.testing.assert_frame_equal(resumed, pd.read_parquet(traces / "whole" / "results.parquet"))


def test_without_a_parquet_engine_the_sweep_warns(traces, monkeypatch):
    import pandas.io.parquet

    # As if neither engine pandas writes Parquet with (pyarrow, fastparquet) were installed: the
    # import pandas makes of them fails as it does then (the rest of pandas keeps pyarrow).
    real = pandas.io.parquet.import_optional_dependency

    def without_engines(name, *args, **kwargs):
        if name.split(".")[0] in ("pyarrow", "fastparquet"):
            raise ImportError(f"Missing optional dependency '{name}'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(pandas.io.parquet, "import_optional_dependency", without_engines)
    spec = {"base": "x86-64", "traces": [str(traces / "demo.xtr")], "vary": {"tlb.1.entries": [16, 64]}}
    with pytest.warns(UserWarning, match=r"results\.parquet not written.*pip install pyarrow") as w:
        df = xlat.sweep(spec, out=traces / "out", progress=False)
    assert len(w) == 1 and len(str(w[0].message).splitlines()) == 1
    assert len(df) == 2 and (traces / "out" / "results.csv").exists()
    assert not (traces / "out" / "results.parquet").exists()
