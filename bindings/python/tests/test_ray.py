"""Sweeps on a Ray cluster started here, against the same sweeps run locally.

The cluster (ray_cluster.py) runs in network and process namespaces of its own: its only
network is a loopback interface, so nothing it does leaves this machine, and every process it
starts ends with it.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

import xlat

from test_sweep import SWEEP, point_files

HERE = Path(__file__).resolve().parent


def in_namespaces(argv):
    """argv run as the init of new network, process and mount namespaces, loopback up."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("unshare (util-linux) and ip (iproute2) are needed: scripts/test.sh installs them")
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--net", "--pid", "--fork", "--mount-proc", "--kill-child", "--",
            "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv]


def test_a_sweep_on_ray_is_the_local_one(traces, cli, xlat_bin):
    import ray  # noqa: F401  (scripts/test.sh installs it: without it the test fails)

    (traces / "sweep.toml").write_text(SWEEP)
    local = xlat.sweep(traces / "sweep.toml", out=traces / "local", progress=False)
    # A sweep that stopped part way: some points done, the others to compute on the cluster.
    shutil.copytree(traces / "local", traces / "resumed")
    (traces / "resumed" / "results.csv").unlink()
    (traces / "resumed" / "results.parquet").unlink()
    files = point_files(traces / "resumed")
    for p in files[1::3]:
        p.unlink()
    kept = {p: p.stat().st_mtime_ns for p in point_files(traces / "resumed")}
    assert 0 < len(kept) < len(files)
    # A pass that fails on a worker: a trace that is not one.
    (traces / "bad.xtr").write_bytes(b"not a trace at all" * 100)
    (traces / "bad.toml").write_text('base = "x86-64"\ntraces = ["bad.xtr"]\n')
    bad = cli.error("sweep", traces / "bad.toml", "--out", traces / "bad-local")

    # Ray's session files go to a short path (its socket paths must fit in 107 bytes), removed after.
    temp = tempfile.mkdtemp(prefix="xray")
    env = dict(os.environ, XLAT_BIN=xlat_bin, RAY_USAGE_STATS_ENABLED="0", XLAT_RAY_TEMP=temp)
    try:
        r = subprocess.run(in_namespaces([sys.executable, str(HERE / "ray_cluster.py"), str(traces)]),
                           capture_output=True, text=True, env=env, timeout=900)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    log = traces / "ray-head.log"
    assert r.returncode == 0, (r.stderr[-3000:], log.read_text()[-3000:] if log.exists() else "")

    for out in ("api", "cli", "resumed"):
        pd.testing.assert_frame_equal(pd.read_parquet(traces / out / "results.parquet"), local)
        assert (traces / out / "results.csv").read_text() == (traces / "local" / "results.csv").read_text()
    now = point_files(traces / "resumed")
    assert len(now) == len(files)
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items()), "points done before were not recomputed"
    assert (traces / "bad.err").read_text() == f"SimulationError: {bad}"
