"""The functions and classes of the ``xlat`` package (re-exported by ``xlat/__init__.py``, which
keeps the package's namespace to the API itself)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _xlat
from ._xlat import ConfigError, Design

PathLike = Union[str, "os.PathLike[str]"]


def presets() -> List[str]:
    """The names of the built-in designs (``xlat presets``)."""
    return list(_xlat.presets())


def _design(d: Union[Design, str, "os.PathLike[str]"]) -> Design:
    """A design from a Design, a preset's name or a TOML config's path: a str ending in ``.toml``
    or naming an existing file is read as a config file, any other str names a preset."""
    if isinstance(d, Design):
        return d
    if isinstance(d, os.PathLike):
        return Design.from_toml(Path(os.fspath(d)))
    if isinstance(d, str):
        if d in _xlat.presets():
            return Design.preset(d)
        if d.endswith(".toml") or os.path.isfile(d):
            return Design.from_toml(Path(d))
        try:
            return Design.preset(d)
        except ConfigError as e:
            hint = re.search(r" \(did you mean '[^']*'\?\)", str(e))
            raise ConfigError(
                f"not a preset or a .toml file: '{d}'{hint.group(0) if hint else ''}; "
                "name a preset (xlat.presets() lists them), a TOML config's path, or pass an xlat.Design"
            ) from None
    raise ConfigError(
        f"expected a Design, a preset's name or a TOML config's path, got {type(d).__name__}"
    )


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
    designs: Union[Design, str, "os.PathLike[str]", Sequence[Union[Design, str, "os.PathLike[str]"]]],
    trace: PathLike,
    max_refs: Optional[int] = None,
) -> Results:
    """Simulates the designs over a trace in one pass, as ``xlat run`` does. A design is a
    Design, a preset's name (``"x86-64"``) or a TOML config's path (``"mine.toml"``, a
    ``pathlib.Path``): a str ending in ``.toml`` or naming an existing file is read as a config.
    Releases the GIL while it runs."""
    if isinstance(designs, (Design, str, os.PathLike)):
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



def _list_arg(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, range) and v.step == 1 and len(v) > 0:
        return f"{v.start}..{v.stop - 1}"
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def _bytes(v: Any) -> int:
    if isinstance(v, str):
        t = v.strip()
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:].upper(), 1)
        num = t[:-1] if mult > 1 else t
        if not num.isdigit():
            raise ConfigError(f"--page-size: expected a byte count like 4096, 64K, 1M or 2G, got '{t}'")
        return int(num) * mult
    if isinstance(v, bool) or not isinstance(v, int) and not hasattr(v, "__index__"):
        raise ConfigError(f"--page-size: expected a byte count like 4096, 64K, 1M or 2G, got {v!r}")
    return int(v)


class Curve:
    """Miss curves of one pass over a trace (``xlat curve``): one element per point in each
    numpy array, in the order of ``xlat curve --csv`` (page size, then entries, then ways).

    ``entries``, ``ways``, ``misses``, ``page_size`` are integer arrays; ``miss_ratio`` the misses
    over the lookups at that page size; ``mpki`` misses per 1000 instructions (NaN for a trace
    without instruction fetches). ``trace`` is what was read (the JSON's ``trace`` object),
    ``lookups`` the lookups per page size.
    """

    def __init__(self, trace: Dict[str, Any], policy: str, sample: Optional[float], curves: Sequence[Any]):
        import numpy as np

        self.trace: Dict[str, Any] = trace
        self.policy: str = policy
        self.sample: Optional[float] = sample
        self.lookups: Dict[int, int] = {int(c[0]): int(c[1]) for c in curves}
        self.page_size = np.concatenate([np.full(len(c[2]), c[0], dtype=np.uint64) for c in curves])
        self.entries = np.concatenate([np.asarray(c[2], dtype=np.uint32) for c in curves])
        self.ways = np.concatenate([np.asarray(c[3], dtype=np.uint32) for c in curves])
        self.misses = np.concatenate([np.asarray(c[4], dtype=np.uint64) for c in curves])
        lookups = np.concatenate([np.full(len(c[2]), c[1], dtype=np.float64) for c in curves])
        with np.errstate(divide="ignore", invalid="ignore"):
            self.miss_ratio = np.where(lookups > 0, self.misses.astype(np.float64) / lookups, 0.0)
        instructions = trace["instructions"]
        if instructions > 0:
            self.mpki = self.misses.astype(np.float64) * 1000.0 / float(instructions)
        else:
            self.mpki = np.full(len(self.misses), np.nan)

    def __len__(self) -> int:
        return len(self.misses)

    def __repr__(self) -> str:
        return f"Curve({self.trace['path']!r}: {len(self)} points, {self.policy})"

    def to_pandas(self) -> Any:
        """The points as a DataFrame with the columns of ``xlat curve --csv``."""
        import pandas as pd

        return pd.DataFrame(
            {
                "entries": self.entries,
                "ways": self.ways,
                "misses": self.misses,
                "miss_ratio": self.miss_ratio,
                "mpki": self.mpki,
                "page_size": self.page_size,
            }
        )


def curve(
    trace: PathLike,
    entries: Any = None,
    ways: Any = "full",
    policy: str = "lru",
    page_size: Any = 4096,
    sample: Optional[float] = None,
    max_refs: Optional[int] = None,
) -> Curve:
    """The misses of every TLB size and associativity asked for, in one pass over a trace (``xlat
    curve``, docs/curve.md). ``entries``: sizes as a list, a ``range`` or the command's text
    (``"8,16,32"``, ``"1..4096"``), by default the command's (the powers of two from 1 to 4096,
    those below an associativity skipped for it); ``ways``: way counts and ``"full"``; ``page_size``: bytes (or
    ``"2M"``), or a list of them, one curve each. Releases the GIL while it runs."""
    sizes = page_size if isinstance(page_size, (list, tuple)) else [page_size]
    info, curves = _xlat.curve(
        os.fspath(trace), None if entries is None else _list_arg(entries), _list_arg(ways), policy, [_bytes(p) for p in sizes], sample, max_refs
    )
    return Curve(json.loads(info), policy, sample, curves)
