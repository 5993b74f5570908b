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


LINK_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import numba
from samediff.kernels import fastload
import callee
fastload.adopt(callee.inc)
first = callee.inc(41)            # from the disk cache once the first child has saved it
parsed = fastload.stats["lazy_links_parsed"]

@numba.njit
def caller(x):                    # links callee's library into a new one
    return callee.inc(x) * 2

print(json.dumps({"first": first, "linked": caller(1), "stats": fastload.stats,
                  "parsed_before_link": parsed}))
"""


@pytest.mark.skipif(not fastload.ENABLED, reason="fast loads are off (ND4PY_FAST_LOAD=0)")
def test_a_lazily_loaded_function_still_links_into_a_new_caller(tmp_path):
    """A load leaves the linkable IR unparsed; compiling a caller of the loaded function
    parses it then, and the caller gets the right answer."""
    (tmp_path / "callee.py").write_text(
        "import numba\n\n@numba.njit(cache=True)\ndef inc(x):\n    return x + 1\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    runs = [json.loads(subprocess.run(
        [sys.executable, "-c", LINK_CHILD, str(tmp_path)], env=env, capture_output=True,
        text=True, check=True, cwd=ROOT).stdout.strip().splitlines()[-1]) for _ in range(2)]
    for got in runs:
        assert (got["first"], got["linked"]) == (42, 4)
    warm = runs[1]
    assert warm["stats"]["fast_loads"] >= 1 and warm["stats"]["fast_load_fallbacks"] == 0
    assert warm["parsed_before_link"] == 0  # the load itself parsed nothing
    assert warm["stats"]["lazy_links_parsed"] == 1  # the caller's compile did


@pytest.mark.skipif(not fastload.ENABLED, reason="fast loads are off (ND4PY_FAST_LOAD=0)")
def test_a_load_that_fails_after_joining_the_jit_is_not_retried(tmp_path, monkeypatch):
    """Once a fast load's machine code has joined the JIT, Numba's own load would define the
    same symbols a second time: the error is reported instead."""
    monkeypatch.setenv("ND4PY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(codegen, "_loaded", {})
    source = codegen.module_source(list(codegen.PRELUDE) + [
        codegen.decorator(), "def kernel(x):", "    return x + 7", ""])
    assert codegen.load(source).kernel(1) == 8
    monkeypatch.setattr(codegen, "_loaded", {})
    module = codegen.load(source)

    def broken(self, name):
        raise RuntimeError("lookup failed")
    monkeypatch.setattr(fastload.LazyLinkLibrary, "get_pointer_to_function", broken)
    before = dict(fastload.stats)
    with pytest.raises(RuntimeError, match="lookup failed"):
        module.kernel(1)
    assert fastload.stats["fast_load_fallbacks"] == before["fast_load_fallbacks"]
