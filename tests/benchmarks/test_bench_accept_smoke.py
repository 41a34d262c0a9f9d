"""A tiny run of ``bench_accept.py`` (the figures themselves are read from its full run): the
script runs end to end and prints its ratio."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("bench_accept.py")


def test_the_accept_benchmark_runs_and_prints_a_ratio() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--requests", "30",
                           "--max-new-tokens", "32", "--skip-capacity"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r"accept replay / bare loop: (\d+\.\d+)x", done.stdout)
    assert found is not None and float(found.group(1)) > 0
