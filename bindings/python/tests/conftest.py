"""Shared fixtures: the repository, its bundled traces and the `xlat` command to compare with."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def xlat_bin() -> str:
    """The `xlat` command: $XLAT_BIN, else the repository's debug build (`cargo build`)."""
    path = os.environ.get("XLAT_BIN") or str(REPO / "target" / "debug" / "xlat")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no xlat command at {path}: run `cargo build` first or set XLAT_BIN")
    return path


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    """A scratch directory holding the two bundled traces."""
    for t in ("demo.xtr", "sort-400.lackey.zst"):
        shutil.copy(REPO / "data" / t, tmp_path / t)
    return tmp_path


class Cli:
    def __init__(self, path: str):
        self.path = path

    def __call__(self, *args: str, cwd=None, check: bool = True, env=None) -> subprocess.CompletedProcess:
        r = subprocess.run([self.path, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env)
        if check and r.returncode != 0:
            raise AssertionError(f"xlat {' '.join(map(str, args))} failed ({r.returncode}): {r.stderr}")
        return r

    def json(self, *args: str, cwd=None) -> dict:
        return json.loads(self(*args, cwd=cwd).stdout)

    def error(self, *args: str, cwd=None) -> str:
        """The one-line message of a command that must fail with status 2, without `xlat: error: `."""
        r = self(*args, cwd=cwd, check=False)
        assert r.returncode == 2, r
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("xlat: error: "), r.stderr
        return lines[0][len("xlat: error: "):]


@pytest.fixture(scope="session")
def cli(xlat_bin: str) -> Cli:
    return Cli(xlat_bin)
