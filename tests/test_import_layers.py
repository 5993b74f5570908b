"""The kernels layer (``samediff/kernels``): ``import nd4py`` loads no Numba and no kernel, the
first op that needs a kernel does, and the layer imports nothing from the layers above it."""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

KERNELS = pathlib.Path(__file__).resolve().parent.parent / "samediff" / "kernels"
#: modules of the layer that import cheaply (no Numba): ``import nd4py`` may load these only
LIGHT = {"samediff.kernels", "samediff.kernels.forksafe", "samediff.kernels.geometry",
         "samediff.kernels.compiling", "samediff.kernels.routes",
         "samediff.kernels.process", "samediff.kernels.frozen"}

_PROBE = """
import sys
def loaded():
    heavy = sorted(m for m in sys.modules if m.startswith("samediff.kernels") and m not in LIGHT)
    return "numba" in sys.modules, heavy
LIGHT = %r
import numpy as np
import nd4py as nd
print("import", *loaded())
y = nd.ones(3) + 1
assert y.numpy().tolist() == [2.0, 2.0, 2.0]
print("eager", *loaded())
x = np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6) / 100
w = np.linspace(-1, 1, 4 * 3 * 3 * 3, dtype=np.float32).reshape(4, 3, 3, 3)
got = nd.cnn.conv2d(nd.create(x), nd.create(w), weights_format="OIHW").numpy()
ref = np.zeros((2, 4, 4, 4), np.float64)
for i in range(3):
    for j in range(3):
        ref += np.einsum("nchw,oc->nohw", x[:, :, i:i + 4, j:j + 4], w[:, :, i, j])
assert np.allclose(got, ref, rtol=1e-5, atol=1e-5), abs(got - ref).max()
print("conv2d", *loaded())
""" % (LIGHT,)


def test_import_nd4py_loads_no_numba_until_a_kernel_runs():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         check=True, cwd=KERNELS.parent.parent).stdout.splitlines()
    assert out[0] == "import False []", out   # no Numba, no kernel module
    assert out[1] == "eager False []", out    # an elementwise op runs on numpy alone
    stage, numba_loaded, *_ = out[2].split(" ", 2)
    assert (stage, numba_loaded) == ("conv2d", "True"), out
    assert "samediff.kernels.cnn" in out[2], out


def _imports(path: pathlib.Path) -> list[str]:
    """Absolute names of every module ``path`` imports (at any depth in the file)."""
    package = "samediff.kernels"  # every file checked is a module of this package
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                names.append(f"{base}.{node.module}" if node.module else base)
            else:
                names.append(node.module or "")
    return names


def test_kernels_import_nothing_above_them():
    files = sorted(KERNELS.glob("*.py"))
    assert len(files) >= 10
    for path in files:
        for name in _imports(path):
            if name == "samediff" or name.startswith("samediff."):
                assert name.startswith("samediff.kernels"), f"{path.name} imports {name}"
            assert not name.startswith(("nd4py", "tracing")), f"{path.name} imports {name}"


def test_the_import_check_sees_an_upward_import(tmp_path):
    # the check above must be able to fail: a relative import that leaves the package
    bad = tmp_path / "bad.py"
    bad.write_text("from ..ops import registry\nfrom . import blas\n")
    assert _imports(bad) == ["samediff.ops", "samediff.kernels"]
