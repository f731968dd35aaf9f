"""``xlat.sweep``: a design-space sweep on this machine (threads) or on a Ray cluster.

The planning, the keys of the points, their store and the table are the engine's
(``xlat::sweep``, shared with ``xlat sweep``); this module only schedules the passes.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _xlat
from ._xlat import ConfigError, SimulationError, XlatError

Spec = Union[str, "os.PathLike[str]", Mapping[str, Any]]


def _toml_value(v: Any, where: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if hasattr(v, "item") and not isinstance(v, (list, tuple)):  # numpy scalars
        return _toml_value(v.item(), where)
    if isinstance(v, (list, tuple)) or hasattr(v, "tolist"):
        items = v.tolist() if hasattr(v, "tolist") else v
        return "[" + ", ".join(_toml_value(x, where) for x in items) + "]"
    raise ConfigError(f"sweep {where}: expected numbers, strings, booleans or lists of them, got {type(v).__name__}")


def spec_to_toml(spec: Mapping[str, Any], out: Path) -> str:
    """A sweep given as a dict (the sweep file's keys) as the sweep file's TOML text. A
    ``Design`` as ``base`` is written to ``OUT/base.toml`` and named by path."""
    lines: List[str] = []
    tables: List[str] = []
    for key, value in spec.items():
        if key == "base" and isinstance(value, _xlat.Design):
            out.mkdir(parents=True, exist_ok=True)
            path = out / "base.toml"
            path.write_text(value.to_toml())
            value = str(path.resolve())
        if key in ("vary", "workloads"):
            tables.append(f"[{key}]")
            for k, v in dict(value).items():
                tables.append(f"{json.dumps(str(k))} = {_toml_value(v, f'{key}.{k}')}")
        elif key == "zip":
            groups = [value] if isinstance(value, Mapping) else list(value)
            for g in groups:
                tables.append("[[zip]]")
                for k, v in dict(g).items():
                    tables.append(f"{json.dumps(str(k))} = {_toml_value(v, f'zip.{k}')}")
        else:
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            if key == "traces":
                value = [os.fspath(t) for t in value]
            lines.append(f"{key} = {_toml_value(value, key)}")
    return "\n".join(lines + tables) + "\n"


def plan(spec: Spec, out: Optional[Union[str, "os.PathLike[str]"]] = None) -> Tuple[Any, Path]:
    """Parses a sweep (a file, TOML text or a dict): the engine's plan and the output directory."""
    if isinstance(spec, Mapping):
        out_dir = Path(out) if out is not None else Path("sweep.out")
        text, name, base_dir = spec_to_toml(spec, out_dir), "<sweep>", Path.cwd()
    elif isinstance(spec, str) and "\n" in spec:
        out_dir = Path(out) if out is not None else Path("sweep.out")
        text, name, base_dir = spec, "<sweep>", Path.cwd()
    else:
        path = Path(os.fspath(spec))
        try:
            text = path.read_text()
        except OSError as e:
            raise ConfigError(f"{path}: {e.strerror or e}") from None
        name, base_dir = str(path), (path.parent if str(path.parent) else Path("."))
        out_dir = Path(out) if out is not None else path.with_name(path.stem + ".out")
    return _xlat.SweepPlan(text, name, str(base_dir), str(out_dir)), out_dir


def _progress(total: int, enabled: bool) -> Any:
    if not enabled or total == 0:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="point", desc="xlat sweep")


def _run_local(p: Any, tasks: List[Any], jobs: int, progress: bool) -> None:
    bar = _progress(sum(len(t[5]) for t in tasks), progress)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(p.run_task, t[4], t[5], t[2]): t for t in tasks}
        try:
            for f in as_completed(futures):
                f.result()
                if bar is not None:
                    bar.update(len(futures[f][5]))
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        finally:
            if bar is not None:
                bar.close()


def run_group(trace: str, designs: List[str], max_refs: Optional[int]) -> str:
    """A Ray task: simulates the designs (TOML texts) over the trace in one pass."""
    return _xlat.run_group(trace, designs, max_refs)


def _run_on_ray(p: Any, tasks: List[Any], address: str, progress: bool) -> None:
    try:
        import ray
    except ImportError:
        raise XlatError("ray=...: the ray package is not installed (pip install 'ray>=2.9')") from None
    started = False
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        except Exception as e:  # Ray raises ConnectionError, ValueError, RuntimeError...
            raise XlatError(f"ray: cannot connect to the cluster at {address!r}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        started = True
    try:
        remote = ray.remote(run_group)
        # Workers do not share the driver's working directory: traces go by absolute path.
        refs = {remote.remote(os.path.abspath(t[0]), t[1], t[3]): t for t in tasks}
        bar = _progress(sum(len(t[5]) for t in tasks), progress)
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for r in done:
                    t = refs[r]
                    try:
                        results = ray.get(r)
                    except ray.exceptions.RayTaskError as e:
                        cause = getattr(e, "cause", None)
                        msg = str(cause) if cause is not None else str(e).splitlines()[-1]
                        msg = msg.replace(os.path.abspath(t[0]), t[0])  # as the local run says it
                        kind = type(cause) if isinstance(cause, XlatError) else SimulationError
                        raise kind(msg) from None
                    p.store(t[4], t[5], t[2], results)
                    if bar is not None:
                        bar.update(len(t[5]))
        finally:
            if bar is not None:
                bar.close()
            for r in pending:
                ray.cancel(r)
    finally:
        if started:
            ray.shutdown()


def sweep(
    spec: Spec,
    out: Optional[Union[str, "os.PathLike[str]"]] = None,
    jobs: Optional[int] = None,
    group: int = 32,
    ray: Optional[str] = None,
    progress: bool = True,
    tables: bool = True,
) -> Any:
    """Runs a design-space sweep and returns its table as a pandas DataFrame.

    ``spec`` is a sweep file's path, its TOML text, or a dict of the same keys (``base``,
    ``traces``, ``vary``, ``zip``, ``max_refs``, ``workloads``; ``base`` may be a Design).
    Finished points are kept under ``out`` (default: ``NAME.out`` beside ``NAME.toml``, or
    ``sweep.out``) by content hash, so a rerun computes only the missing ones. With ``ray`` (a
    cluster address: ``"auto"``, ``"HOST:PORT"``, ``"local"``) each pass over a trace is a Ray
    task; the table is the same. With ``tables`` the table is also written as
    ``OUT/results.csv`` and ``OUT/results.parquet`` (the latter needs pyarrow: without it a
    warning says so).
    """
    if group < 1:
        raise ConfigError("group must be at least 1")
    if jobs is not None and jobs < 1:
        raise ConfigError("jobs must be at least 1")
    p, out_dir = plan(spec, out)
    jobs = jobs or os.cpu_count() or 1
    tasks = p.tasks(jobs, group)
    if tasks:
        if ray is None:
            _run_local(p, tasks, jobs, progress)
        else:
            _run_on_ray(p, tasks, ray, progress)
    df = table(p)
    missing = int((df["status"] == "missing").sum())
    if missing:
        raise SimulationError(f"{missing} of {len(df)} points have no result in {out_dir}")
    if tables:
        p.write_csv(str(out_dir / "results.csv"))
        try:
            df.to_parquet(out_dir / "results.parquet", index=False)
        except ImportError:
            warnings.warn(
                f"xlat.sweep: {out_dir / 'results.parquet'} not written: pandas needs a Parquet engine "
                "(pip install pyarrow, or the package's extra: pip install 'xlat[parquet]')",
                stacklevel=2,
            )
    return df


def table(p: Any) -> Any:
    """The plan's table as a DataFrame (a missing point's row has status ``missing``)."""
    import pandas as pd

    columns, rows = p.table()
    return pd.DataFrame(json.loads(rows), columns=columns)


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m xlat sweep SWEEP.toml [--out DIR] [--jobs N] [--ray ADDRESS]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m xlat sweep", description="Run an xlat design-space sweep.")
    ap.add_argument("file")
    ap.add_argument("--out")
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--group", type=int, default=32)
    ap.add_argument("--ray", metavar="ADDRESS")
    ap.add_argument("--quiet", "-q", action="store_true")
    ap.add_argument("--points-only", action="store_true", help="only compute the missing points (no tables)")
    a = ap.parse_args(argv)
    try:
        if a.points_only:
            if a.group < 1 or (a.jobs is not None and a.jobs < 1):
                raise ConfigError("--jobs and --group must be at least 1")
            p, _ = plan(a.file, a.out)
            tasks = p.tasks(a.jobs or os.cpu_count() or 1, a.group)
            if tasks:
                if a.ray:
                    _run_on_ray(p, tasks, a.ray, not a.quiet and sys.stderr.isatty())
                else:
                    _run_local(p, tasks, a.jobs or os.cpu_count() or 1, not a.quiet and sys.stderr.isatty())
        else:
            df = sweep(a.file, a.out, a.jobs, a.group, a.ray, progress=not a.quiet and sys.stderr.isatty())
            if not a.quiet:
                print(f"sweep: {len(df)} rows", file=sys.stderr)
    except XlatError as e:
        print(f"xlat: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
