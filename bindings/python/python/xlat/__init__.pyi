from os import PathLike
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._xlat import (
    ConfigError as ConfigError,
    Design as Design,
    SimulationError as SimulationError,
    TraceError as TraceError,
    TracerError as TracerError,
    XlatError as XlatError,
)

_Path = Union[str, PathLike[str]]

__version__: str

def presets() -> List[str]: ...
def flatten(value: Any, prefix: str = "") -> Dict[str, Any]: ...

class Results:
    json: Dict[str, Any]
    designs: List[Dict[str, Any]]
    trace: Dict[str, Any]
    complete: bool
    def __init__(self, doc: Dict[str, Any]) -> None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Dict[str, Any]]: ...
    def __getitem__(self, name: Union[str, int]) -> Dict[str, Any]: ...
    def to_pandas(self) -> Any: ...

def run(
    designs: Union[Design, _Path, Sequence[Union[Design, _Path]]],
    trace: _Path,
    max_refs: Optional[int] = None,
) -> Results: ...
def info(trace: _Path) -> Dict[str, Any]: ...
def trace(
    cmd: Union[str, Sequence[str]], out: _Path, backend: str = "qemu", children: bool = False
) -> Dict[str, Any]: ...
def sweep(
    spec: Union[_Path, Mapping[str, Any]],
    out: Optional[_Path] = None,
    jobs: Optional[int] = None,
    group: int = 32,
    ray: Optional[str] = None,
    progress: bool = True,
    tables: bool = True,
) -> Any: ...
def plot_sweep(
    df: Any,
    x: str,
    y: str,
    by: str = "trace",
    path: Optional[_Path] = None,
    ax: Any = None,
    title: Optional[str] = None,
) -> Any: ...

class Curve:
    trace: Dict[str, Any]
    policy: str
    sample: Optional[float]
    lookups: Dict[int, int]
    entries: Any
    ways: Any
    misses: Any
    miss_ratio: Any
    mpki: Any
    page_size: Any
    def __len__(self) -> int: ...
    def to_pandas(self) -> Any: ...

def curve(
    trace: _Path,
    entries: Union[str, Sequence[int], range, None] = None,
    ways: Union[str, Sequence[Union[int, str]]] = "full",
    policy: str = "lru",
    page_size: Union[int, str, Sequence[Union[int, str]]] = 4096,
    sample: Optional[float] = None,
    max_refs: Optional[int] = None,
) -> Curve: ...
