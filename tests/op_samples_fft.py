"""Sample rows of the Fourier transforms (``samediff/ops/fft.py``), added to
``op_samples.SAMPLES`` like the cnn families' rows. Real samples: the suites cast the inputs to
float32/float64, and the spectra come out complex64/complex128."""
from __future__ import annotations

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import dft_ref, dftn_ref, u
except ImportError:  # ... or tests/ became one
    from .op_references import dft_ref, dftn_ref, u


def _spectrum_dtype(run: str) -> str:
    return "complex64" if run == "float32" else "complex128"


def fft_samples(S) -> dict:
    """The rows of every transform (``S`` is ``op_samples.Sample``)."""
    rows = {}
    for kind in ("fft", "ifft", "rfft", "ihfft"):
        rows[kind] = [S([u(2, 6)], {}, dft_ref(kind), out_dtype=_spectrum_dtype),
                      S([u(5, 3)], {"n": 4, "axis": 0, "norm": "ortho"}, dft_ref(kind),
                        out_dtype=_spectrum_dtype),
                      S([u(7)], {"n": 9, "norm": "forward"}, dft_ref(kind),
                        out_dtype=_spectrum_dtype)]
    for kind in ("irfft", "hfft"):
        rows[kind] = [S([u(2, 4)], {}, dft_ref(kind)),
                      S([u(3, 5)], {"n": 7, "axis": 0, "norm": "ortho"}, dft_ref(kind)),
                      S([u(6)], {"n": 6, "norm": "forward"}, dft_ref(kind))]
    for kind in ("fftn", "ifftn", "rfftn", "irfftn"):
        out = {} if kind == "irfftn" else {"out_dtype": _spectrum_dtype}
        rows[kind] = [S([u(2, 3, 4)], {}, dftn_ref(kind), **out),
                      S([u(4, 3, 2)], {"s": (3, 4), "axes": (0, 2), "norm": "ortho"},
                        dftn_ref(kind), **out)]
    return rows
