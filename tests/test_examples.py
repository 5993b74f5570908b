"""Smoke tests: the example scripts run to the end (each checks its own results)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_eager_scope_compile():
    subprocess.run([sys.executable, "examples/eager_scope_compile.py", "--quick"], cwd=ROOT,
                   check=True, timeout=120)
