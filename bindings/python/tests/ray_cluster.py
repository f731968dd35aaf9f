"""Runs sweeps on a Ray cluster of its own (test_ray.py starts it in network and process
namespaces of its own, so the cluster reaches nothing but this machine's loopback and ends with
this script).

    python ray_cluster.py DIR

DIR holds sweep.toml and its traces. The script starts a head node bound to 127.0.0.1
(`ray start --head --block`), then writes:
- DIR/api: `xlat.sweep(DIR/sweep.toml, ray=ADDRESS)`;
- DIR/cli: `xlat sweep DIR/sweep.toml --ray ADDRESS` (the command, through `python -m xlat`);
- DIR/resumed (if present beforehand): the same sweep resumed on the cluster;
- DIR/bad.err: the error of DIR/bad.toml's sweep on the cluster.
"""

import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import xlat

ADDRESS = "127.0.0.1:6379"


def main() -> None:
    work = Path(sys.argv[1])
    # No usage reports; token authentication with a token of this run's own (not ~/.ray's).
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16))
    os.environ.update(env)
    ray_bin = str(Path(sys.executable).with_name("ray"))
    temp = os.environ.get("XLAT_RAY_TEMP") or tempfile.mkdtemp(prefix="xray")  # short: socket paths
    head = subprocess.Popen(
        [ray_bin, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", "6379",
         "--include-dashboard", "false", "--disable-usage-stats", "--num-cpus", "2",
         "--object-store-memory", "80000000", "--temp-dir", temp],
        stdout=subprocess.DEVNULL, stderr=open(work / "ray-head.log", "w"), env=env,
    )
    deadline = time.monotonic() + 180
    while subprocess.run([ray_bin, "status", "--address", ADDRESS], capture_output=True, env=env).returncode != 0:
        if head.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the Ray head did not start: see {work / 'ray-head.log'}")
        time.sleep(0.5)

    xlat.sweep(work / "sweep.toml", out=work / "api", ray=ADDRESS, progress=False)
    cli = os.environ["XLAT_BIN"]
    r = subprocess.run([cli, "sweep", str(work / "sweep.toml"), "--out", str(work / "cli"), "--ray", ADDRESS, "-q"],
                       capture_output=True, text=True, env=dict(env, XLAT_PYTHON=sys.executable))
    if r.returncode != 0:
        sys.exit(f"xlat sweep --ray failed: {r.stderr}")
    if (work / "resumed").exists():
        xlat.sweep(work / "sweep.toml", out=work / "resumed", ray=ADDRESS, progress=False)
    # A pass that fails on a worker raises the engine's one-line error here.
    try:
        xlat.sweep(work / "bad.toml", out=work / "bad", ray=ADDRESS, progress=False)
        (work / "bad.err").write_text("no error")
    except xlat.XlatError as e:
        (work / "bad.err").write_text(f"{type(e).__name__}: {e}")
    head.terminate()


if __name__ == "__main__":
    main()
