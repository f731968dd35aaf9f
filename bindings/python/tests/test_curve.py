"""xlat.curve against `xlat curve --json`: the same points, as numpy arrays."""

import math

import numpy as np
import pytest

import xlat

CASES = [
    ({}, []),
    ({"entries": range(1, 65), "ways": ["full", 1, 2, 4]}, ["--entries", "1..64", "--ways", "full,1,2,4"]),
    ({"entries": [8, 16, 64], "policy": "fifo", "page_size": [4096, "2M"]},
     ["--entries", "8,16,64", "--policy", "fifo", "--page-size", "4096,2M"]),
    ({"entries": "16,256,1024", "sample": 0.5, "max_refs": 200000},
     ["--entries", "16,256,1024", "--sample", "0.5", "--max-refs", "200000"]),
    # The default sizes with an associativity above some of them: those are skipped for it.
    ({"ways": "full,4"}, ["--ways", "full,4"]),
]


@pytest.mark.parametrize("kwargs,flags", CASES)
@pytest.mark.parametrize("trace", ["demo.xtr", "sort-400.lackey.zst"])
def test_curve_is_the_commands(traces, cli, trace, kwargs, flags):
    c = xlat.curve(traces / trace, **kwargs)
    doc = cli.json("curve", "-t", traces / trace, *flags, "--json", "-")
    assert c.trace == doc["trace"]
    assert c.policy == doc["policy"] and c.sample == doc["sample"]
    points = [p for curve in doc["curves"] for p in curve["points"]]
    assert len(c) == len(points) > 0
    for name in ("entries", "ways", "misses", "page_size"):
        assert isinstance(getattr(c, name), np.ndarray)
        assert getattr(c, name).tolist() == [p[name] for p in points], name
    assert c.miss_ratio.tolist() == [p["miss_ratio"] for p in points]
    assert [None if math.isnan(v) else v for v in c.mpki.tolist()] == [p["mpki"] for p in points]
    assert c.lookups == {curve["page_size"]: curve["lookups"] for curve in doc["curves"]}
    df = c.to_pandas()
    assert list(df.columns) == ["entries", "ways", "misses", "miss_ratio", "mpki", "page_size"]
    assert df["misses"].tolist() == c.misses.tolist()


@pytest.mark.parametrize(
    "kwargs,flags,error",
    [
        ({"entries": "0,8"}, ["--entries", "0,8"], xlat.ConfigError),
        ({"ways": [3]}, ["--ways", "3"], xlat.ConfigError),
        ({"policy": "mru"}, ["--policy", "mru"], xlat.ConfigError),
        ({"page_size": 3000}, ["--page-size", "3000"], xlat.ConfigError),
        ({"page_size": "4Q"}, ["--page-size", "4Q"], xlat.ConfigError),
    ],
)
def test_curve_errors_are_the_commands(traces, cli, kwargs, flags, error):
    with pytest.raises(error) as e:
        xlat.curve(traces / "demo.xtr", **kwargs)
    assert str(e.value) == cli.error("curve", "-t", traces / "demo.xtr", *flags)


def test_curve_trace_errors(traces, cli):
    with pytest.raises(xlat.TraceError) as e:
        xlat.curve(traces / "nope.xtr")
    assert str(e.value) == cli.error("curve", "-t", traces / "nope.xtr")
    empty = traces / "empty.lackey"
    empty.write_text("")
    with pytest.raises(xlat.SimulationError) as e:
        xlat.curve(empty)
    assert str(e.value) == cli.error("curve", "-t", empty)
