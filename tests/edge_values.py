"""Edge values for differential tests: the inputs on which executors are most likely to part.

Shared by ``test_compiler_hypothesis.py`` (drawn into random graphs) and ``test_edge_values.py``
(fixed regression cases). Every executor (eager, interpreter, compiled) must give the same
NaN and infinity positions on them, and values within the comparison's tolerance elsewhere.

The classes, and why each is here:

* ``NONFINITE``: NaN and +-inf propagate through each fused element expression, row statistic
  and accumulator by different code than numpy's (``inf - inf`` in a row max, ``-inf * 0``
  in ``x * cdf(x)`` activations, NaN through ``max``/``min``), plus signed zeros.
* ``TINY``: subnormals (the fast-math functions scale them; nothing may flush them to zero).
* ``HUGE``: finite values whose squares overflow (float32 above ~1.8e19: layer_norm's
  variance), values next to the largest finite one (float32 sums of them overflow part-way),
  scattered among ordinary values.
* ``SCALES``: an example's data values all multiplied by one large factor. Relative rounding
  errors of row statistics, normalized values and one-sign sums are then what they are at
  scale 1, so they keep their usual tolerances, while squares and partial sums overflow.

float64 stays below ~1e300: its partial sums must not overflow (numpy sums pairwise, kernels
sequentially, so which partial sum overflows depends on the order: a known limit).
"""
from __future__ import annotations

import numpy as np

NAN, INF = float("nan"), float("inf")

NONFINITE = (NAN, INF, -INF, 0.0, -0.0)
TINY = {"float32": (1e-40, -3e-42), "float64": (1e-310, -5e-320)}
HUGE = {"float32": (1e20, -1e20, 1e30, -1e30, 3e38, -3e38),
        "float64": (1e20, -1e20, 1e160, -1e160, 1e300, -1e300)}
SCALES = {"float32": (1e20, 1e38), "float64": (1e20, 1e160, 1e300)}
#: weak Python scalars an example may use in the nonfinite style
NONFINITE_SCALARS = (NAN, INF, -INF)


def masks_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """NaN, +inf and -inf at the same positions (the part of an edge-value result that no
    tolerance may blur)."""
    if want.dtype.kind not in "fc":
        return
    for name, f in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        np.testing.assert_array_equal(f(got), f(want), err_msg=f"{what}: {name} positions")
