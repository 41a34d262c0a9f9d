"""The benchmark smoke cases are complete, and the checked scripts refuse a bad size (the
cases themselves run from ``test_bench_smoke_GROUP.py``, see ``smoke_cases.py``).

A new script without a case fails ``test_every_benchmark_has_a_smoke_case``; a group without
its file (or a file without its group) fails ``test_every_group_has_its_file``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from smoke_cases import GROUPS, HERE, SMOKES

pytestmark = pytest.mark.slow


def test_every_benchmark_has_a_smoke_case() -> None:
    scripts = {path.stem for path in HERE.glob("bench_*.py")}
    assert scripts == {smoke.script for smoke in SMOKES}
    grouped = [script for group in GROUPS.values() for script in group]
    assert sorted(grouped) == sorted(scripts)


def test_every_group_has_its_file() -> None:
    files = {path.stem.removeprefix("test_bench_smoke_")
             for path in HERE.glob("test_bench_smoke_*.py")}
    assert files == set(GROUPS)


TOUCHED = ("bench_demo_exit", "bench_events", "bench_multiturn", "bench_scaleout")
"""Scripts whose options are checked (``core.argtypes``): a bad size is one line, exit 2."""


@pytest.mark.parametrize("script", TOUCHED)
def test_a_bad_size_is_one_line_and_exit_2(script: str) -> None:
    option = {"bench_demo_exit": "--runs", "bench_events": "--rounds"}.get(script, "--window")
    done = subprocess.run([sys.executable, str(HERE / f"{script}.py"), option, "-1"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert option in done.stderr and "'-1'" in done.stderr
