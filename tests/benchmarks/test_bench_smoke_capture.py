"""The capture group of the benchmark smoke cases (``smoke_cases.GROUPS``)."""

from __future__ import annotations

import pytest
from smoke_cases import Smoke, params, run_smoke

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("smoke", params("capture"))
def test_the_benchmark_runs_at_a_tiny_size_and_prints_its_figures(smoke: Smoke) -> None:
    run_smoke(smoke)
