"""Every Python example of the documentation runs, and prints what the document shows.

In each Markdown file of DOCS, in order (the conventions of crates/xlat-cli/tests/cli/doc_examples.rs,
which checks the console examples' output):
- a ```` ```toml ```` block whose first line is ``# NAME.toml`` is written to ``NAME.toml``;
- a ```` ```console ```` block's ``$ COMMAND`` lines run under ``sh -c`` (their output is
  doc_examples.rs's to check), so the Python examples can use the files they make;
- a ```` ```python ```` block runs, all of one document in one namespace, like notebook cells; a
  ```` ```text ```` block right after it is what it must print (``[..]`` matches any part of a line).
  Blocks marked ```` ```py ```` are shown, not run (a cluster's address, say).
- an image ``![...](NAME.svg)`` of the document must be the file of that name the examples wrote.

Examples run in a scratch directory holding links to the repository's data/ and configs/, with
the `xlat` under test first on the PATH. ``XLAT_BLESS=1`` rewrites the expected text and images
with what the examples print and draw now, for a person to review with ``git diff``.
"""

import contextlib
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCS = ["docs/python.md", "docs/sweeps.md"]
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)


def matches(expected: str, got: str) -> bool:
    e, g = expected.splitlines(), got.splitlines()
    if len(e) != len(g):
        return False
    for want, line in zip(e, g):
        pattern = ".*".join(re.escape(p) for p in want.split("[..]"))
        if not re.fullmatch(pattern, line):
            return False
    return True


@pytest.mark.parametrize("doc", DOCS)
def test_the_examples_print_what_the_document_shows(doc, tmp_path, xlat_bin, monkeypatch):
    path = REPO / doc
    text = path.read_text()
    for d in ("data", "configs"):
        (tmp_path / d).symlink_to(REPO / d)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(xlat_bin).parent}{os.pathsep}{os.environ['PATH']}")
    blocks = list(FENCE.finditer(text))
    namespace: dict = {"__name__": "__doc__"}
    rewrites = []
    failures = []
    ran = 0
    for i, m in enumerate(blocks):
        lang, body = m.group(1), m.group(2)
        if lang == "toml" and body.startswith("# ") and body.splitlines()[0].endswith(".toml"):
            (tmp_path / body.splitlines()[0][2:].strip()).write_text(body)
        elif lang == "console":
            for cmd in re.findall(r"^\$ ((?:.*\\\n)*.*)$", body, re.M):
                subprocess.run(["sh", "-c", cmd], capture_output=True)
        elif lang == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(body, f"{doc} block {i}", "exec"), namespace)
            ran += 1
            nxt = blocks[i + 1] if i + 1 < len(blocks) else None
            adjacent = nxt is not None and text[m.end() : nxt.start()].strip() == ""
            if adjacent and nxt.group(1) == "text":
                if not matches(nxt.group(2), out.getvalue()):
                    failures.append(f"{doc} block {i} printed:\n{out.getvalue()}\nexpected:\n{nxt.group(2)}")
                    rewrites.append((nxt.start(2), nxt.end(2), out.getvalue()))
            elif out.getvalue():
                failures.append(f"{doc} block {i} printed output the document does not show:\n{out.getvalue()}")
    assert ran > 0, f"{doc} has no python example"
    images = re.findall(r"!\[[^\]]*\]\(([^)]+\.svg)\)", text)
    for img in images:
        made = tmp_path / img
        assert made.exists(), f"{doc} shows {img}, which no example wrote"
        shown = path.parent / img
        if not shown.exists() or shown.read_bytes() != made.read_bytes():
            if os.environ.get("XLAT_BLESS"):
                shutil.copy(made, shown)
            else:
                failures.append(f"{shown} is not what the example draws now (XLAT_BLESS=1 to update)")
    if failures and os.environ.get("XLAT_BLESS"):
        for start, end, new in sorted(rewrites, reverse=True):
            text = text[:start] + new + text[end:]
        path.write_text(text)
        return
    assert not failures, "\n\n".join(failures)
