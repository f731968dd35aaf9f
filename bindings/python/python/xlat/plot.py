"""Plots of sweep tables: one metric against one parameter, one series per trace."""

import os as _os
from typing import Any as _Any, Optional as _Optional, Union as _Union

from . import _xlat

__all__ = ["plot_sweep"]


def plot_sweep(
    df: _Any,
    x: str,
    y: str,
    by: str = "trace",
    path: _Optional[_Union[str, "_os.PathLike[str]"]] = None,
    ax: _Any = None,
    title: _Optional[str] = None,
) -> _Any:
    """Plots column ``y`` against column ``x`` of a sweep table, one series per value of ``by``.

    With ``ax`` (a matplotlib Axes) it draws one line per series there. With ``path`` it writes
    the engine's own chart (grouped bars, one group per value of ``x``) as SVG or PNG, no
    matplotlib needed. Returns the plotted values as a DataFrame (``x`` down, ``by`` across).
    Rows that share ``x`` and ``by`` must not differ in other varied parameters: filter first.
    """
    dup = df.duplicated(subset=[x, by])
    if dup.any():
        raise _xlat.ConfigError(
            f"plot_sweep: several rows per ({x}, {by}): filter the other varied parameters first"
        )
    pivot = df.pivot(index=x, columns=by, values=y).sort_index()
    if ax is not None:
        for col in pivot.columns:
            ax.plot(pivot.index, pivot[col], marker="o", label=str(col))
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.legend(title=by)
        if title:
            ax.set_title(title)
    if path is not None:
        series = [(str(c), [None if v != v else float(v) for v in pivot[c]]) for c in pivot.columns]
        _xlat.bar_chart(title or f"{y} by {x}", x, y, [_label(v) for v in pivot.index], series, _os.fspath(path))
    return pivot


def _label(v: _Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
