"""xlat: a trace-driven simulator of TLBs, page tables and the OS policies around them.

The Python face of the same engine the ``xlat`` command runs (docs/python.md)::

    import xlat
    d = xlat.Design.preset("x86-64").set("tlb.0.entries", 128)
    r = xlat.run([d, "x86-64", "mine.toml"], "data/sort-400.lackey.zst")
    r.to_pandas()[["name", "tlb.0.misses", "walks.count"]]

Errors raise :class:`XlatError` subclasses carrying the same one-line messages as the command.
"""

# Only the API's names live here (``dir(xlat)``): the implementation and its imports are in
# private modules.
from ._xlat import (
    ConfigError,
    Design,
    SimulationError,
    TraceError,
    TracerError,
    XlatError,
    __version__,
)
from ._api import Curve, Results, curve, flatten, info, presets, run, trace
from ._sweep import sweep
from .plot import plot_sweep

__all__ = [
    "ConfigError",
    "Design",
    "Curve",
    "Results",
    "SimulationError",
    "TraceError",
    "TracerError",
    "XlatError",
    "curve",
    "flatten",
    "info",
    "plot_sweep",
    "presets",
    "run",
    "sweep",
    "trace",
]

# The classes and functions show as the package's own (help(), repr, pickling by name).
for _name in ("Curve", "Results", "curve", "flatten", "info", "presets", "run", "trace", "sweep", "plot_sweep"):
    globals()[_name].__module__ = __name__
del _name
