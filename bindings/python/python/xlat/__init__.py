"""xlat: a trace-driven simulator of TLBs, page tables and the OS policies around them.

The Python face of the same engine the ``xlat`` command runs (docs/python.md)::

    import xlat
    d = xlat.Design.preset("x86-64").set("tlb.0.entries", 128)
    r = xlat.run([d, "x86-64"], "data/sort-400.lackey.zst")
    r.to_pandas()[["name", "tlb.0.misses", "walks.count"]]

Errors raise :class:`XlatError` subclasses carrying the same one-line messages as the command.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _xlat
from ._xlat import (
    ConfigError,
    Design,
    SimulationError,
    TraceError,
    TracerError,
    XlatError,
)
from ._sweep import sweep
from .plot import plot_sweep

__version__: str = _xlat.__version__

__all__ = [
    "ConfigError",
    "Design",
    "Results",
    "SimulationError",
    "TraceError",
    "TracerError",
    "XlatError",
    "flatten",
    "info",
    "plot_sweep",
    "presets",
    "run",
    "sweep",
    "trace",
]

PathLike = Union[str, "os.PathLike[str]"]


def presets() -> List[str]:
    """The names of the built-in designs (``xlat presets``)."""
    return list(_xlat.presets())


def _design(d: Union[Design, str]) -> Design:
    if isinstance(d, Design):
        return d
    if isinstance(d, str):
        return Design.preset(d)
    raise ConfigError(f"expected a Design or a preset name, got {type(d).__name__}")


def flatten(value: Any, prefix: str = "") -> Dict[str, Any]:
    """A JSON document's leaves as a flat dict of dotted paths (lists by index)."""
    out: Dict[str, Any] = {}

    def walk(v: Any, p: str) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{p}.{k}" if p else str(k))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{p}.{i}" if p else str(i))
        else:
            out[p] = v

    walk(value, prefix)
    return out


class Results:
    """What one run produced: the document ``xlat run --json`` writes.

    ``results.designs`` holds one dict per design (the JSON's ``configs``), ``results.trace``
    what was read; ``results["NAME"]`` is one design's dict.
    """

    def __init__(self, doc: Dict[str, Any]):
        self.json: Dict[str, Any] = doc
        self.designs: List[Dict[str, Any]] = doc["configs"]
        self.trace: Dict[str, Any] = doc["trace"]
        self.complete: bool = doc["complete"]

    def __len__(self) -> int:
        return len(self.designs)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        return iter(self.designs)

    def __getitem__(self, name: Union[str, int]) -> Dict[str, Any]:
        if isinstance(name, int):
            return self.designs[name]
        for d in self.designs:
            if d["name"] == name:
                return d
        raise KeyError(name)

    def __repr__(self) -> str:
        names = ", ".join(d["name"] for d in self.designs)
        return f"Results({self.trace['path']!r}: {names})"

    def to_pandas(self) -> "Any":
        """One row per design: ``name``, ``status`` and every field as a dotted-path column
        (``tlb.0.misses``, ``walks.count``, ``page_table.bytes``, ``cycles.total``, ...)."""
        import pandas as pd

        rows = []
        for d in self.designs:
            flat = flatten(d)
            row = {"name": flat.pop("name"), "status": flat.pop("status")}
            row.update(flat)
            rows.append(row)
        return pd.DataFrame(rows)


def run(
    designs: Union[Design, str, Sequence[Union[Design, str]]],
    trace: PathLike,
    max_refs: Optional[int] = None,
) -> Results:
    """Simulates the designs (Design objects or preset names) over a trace in one pass, as
    ``xlat run`` does. Releases the GIL while it runs."""
    if isinstance(designs, (Design, str)):
        designs = [designs]
    ds = [_design(d) for d in designs]
    return Results(json.loads(_xlat.run(ds, os.fspath(trace), max_refs)))


def info(trace: PathLike) -> Dict[str, Any]:
    """A trace's summary: references by kind, distinct pages, processes, events (``xlat info
    --json``)."""
    return json.loads(_xlat.info(os.fspath(trace)))


def trace(
    cmd: Union[str, Sequence[str]],
    out: PathLike,
    backend: str = "qemu",
    children: bool = False,
) -> Dict[str, Any]:
    """Runs a program under a tracer (QEMU plugin or valgrind lackey) and writes its memory
    references to ``out`` (an ``.xtr`` file), as ``xlat trace -o OUT -- CMD`` does. Returns
    the counts. ``cmd`` is a list of arguments, or a string split on whitespace."""
    argv = cmd.split() if isinstance(cmd, str) else [os.fspath(c) for c in cmd]
    return json.loads(_xlat.trace_program(argv, os.fspath(out), backend, children))

