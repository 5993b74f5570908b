"""The kernel disk cache never hands a process a kernel compiled for something else: another
nd4py, Python, NumPy, Numba or llvmlite version, or another CPU. Each of those is part of every
kernel's file name (``codegen._versions``), so a changed one means a different file."""
from __future__ import annotations

import sys

import numba
import numpy as np
import pytest

from samediff.compiler import codegen

SOURCE = "VALUE = 41 + 1\n"


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ND4PY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(codegen, "_loaded", {})
    yield tmp_path / "kernels"


def test_the_key_names_every_version_and_the_cpu():
    key = codegen._versions()
    from llvmlite import __version__ as llvm
    for part in (f"np{np.__version__}", f"nb{numba.__version__}", f"llvm{llvm}",
                 f"py{sys.version_info[:3]}", f"k{codegen.KERNEL_FORMAT}", "-nd", "-cpu"):
        assert part in key, (part, key)


@pytest.mark.parametrize("changed", ["nd0.0.0-other", "nb0.0.1", "cpu000000000000"])
def test_a_kernel_built_under_another_key_is_never_loaded(fresh_cache, monkeypatch, changed):
    first = codegen.load(SOURCE)
    assert first.VALUE == 42 and len(list(fresh_cache.glob("k_*.py"))) == 1
    # the same source under another version/CPU key: a new file, a new module (never the old)
    monkeypatch.setattr(codegen, "_VERSIONS", codegen._versions() + "-" + changed)
    monkeypatch.setattr(codegen, "_loaded", {})
    second = codegen.load(SOURCE)
    assert second is not first and second.__name__ != first.__name__
    assert len(list(fresh_cache.glob("k_*.py"))) == 2
    # and back under the first key, the first file is found again (not recompiled to a third)
    monkeypatch.undo()
    monkeypatch.setenv("ND4PY_CACHE_DIR", str(fresh_cache.parent))
    monkeypatch.setattr(codegen, "_loaded", {})
    assert codegen.load(SOURCE).__name__ == first.__name__
    assert len(list(fresh_cache.glob("k_*.py"))) == 2
