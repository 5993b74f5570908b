"""Every ```python block of the README runs as written (each in a fresh namespace)."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from samediff import udf
from samediff.ops import REGISTRY

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks save files such as model.sdz
    before = set(REGISTRY)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(BLOCKS[index], f"README.md python block {index}", "exec"), {})
    finally:  # user-defined ops a block registers must not leak into the op-table tests
        for name in set(REGISTRY) - before:
            udf.unregister(name)


def test_readme_has_blocks():
    assert len(BLOCKS) >= 5
