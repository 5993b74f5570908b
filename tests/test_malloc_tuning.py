"""``samediff.kernels.process``: applied on import (glibc), and the opt-outs are respected."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHECK = "import samediff.kernels.process as m, samediff; print(m.applied)"


def _applied(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("ND4PY_MALLOC_TUNING", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    done = subprocess.run([sys.executable, "-c", CHECK], env={**clean, **env},
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_tuning_is_applied_on_import_and_can_be_switched_off():
    import platform
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert _applied() == "True"
    assert _applied(ND4PY_MALLOC_TUNING="0") == "False"
    assert _applied(MALLOC_TRIM_THRESHOLD_="1000000") == "False"  # the user's glibc setting wins
