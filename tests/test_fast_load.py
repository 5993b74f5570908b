"""Warm start: a new process loads cached kernels without Numba's full compiler set-up
(``samediff/kernels/fastload.py``), gets the same results, and falls back to Numba's own load
whenever the fast one fails."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import nd4py as nd
from samediff.compiler import codegen
from samediff.kernels import fastload

pytestmark = pytest.mark.compiled
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import json, sys
import numpy as np
import nd4py as nd
from samediff.kernels import fastload

@nd.compile
def f(x):
    return x * 2.0 + 1.0

out = f(nd.create(np.arange(4, dtype=np.float32))).numpy().tolist()
print(json.dumps({"out": out, "stats": fastload.stats,
                  "full_setup": "numba.np.arraymath" in sys.modules}))
"""


@pytest.mark.skipif(not fastload.ENABLED, reason="fast loads are off (ND4PY_FAST_LOAD=0)")
def test_a_new_process_loads_a_cached_kernel_without_numbas_full_setup():
    @nd.compile
    def f(x):
        return x * 2.0 + 1.0
    f(nd.create(np.arange(4, dtype=np.float32)))  # compiled (or loaded) here: on disk now
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    env.pop("ND4PY_EXECUTOR", None)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, check=True, cwd=ROOT)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["out"] == [1.0, 3.0, 5.0, 7.0]
    assert got["stats"]["fast_loads"] >= 1 and got["stats"]["fast_load_fallbacks"] == 0
    assert not got["full_setup"]  # Numba's implementation registries were never loaded


def test_a_failing_fast_load_falls_back_to_numbas_own(tmp_path, monkeypatch):
    monkeypatch.setenv("ND4PY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(codegen, "_loaded", {})
    source = codegen.module_source(list(codegen.PRELUDE) + [
        codegen.decorator(), "def kernel(x):", "    return x + 41", ""])
    assert codegen.load(source).kernel(1) == 42  # compiled and saved
    monkeypatch.setattr(codegen, "_loaded", {})  # a new module: its dispatcher loads from disk
    module = codegen.load(source)
    assert isinstance(module.kernel._cache, fastload.RuntimeOnlyCache) == fastload.ENABLED

    def broken(ctx):
        raise RuntimeError("no runtime")
    monkeypatch.setattr(fastload, "rtsys", SimpleNamespace(initialize=broken))
    before = dict(fastload.stats)
    assert module.kernel(1) == 42
    if fastload.ENABLED:
        assert fastload.stats["fast_load_fallbacks"] == before["fast_load_fallbacks"] + 1
        assert module.kernel.stats.cache_hits  # loaded from disk, not compiled again
