"""Project rules that a reviewer would otherwise have to remember.

- the few process entry points import without ``textual`` (core works without a screen) or
  ``transformers`` (heavy; only code that really loads a tokenizer imports it, lazily): a
  static check cannot see that, since a function-level import is still an import edge.

Rules read from the source (bare imports among them) are ``tests/test_source_rules.py``.
``ruff check .``, ``mypy`` (strict over ``core`` and ``tui``) and ``lint-imports`` (the
dependency directions of pyproject.toml's ``[tool.importlinter]``, explained in
docs/architecture.md) are steps of the README's test command and ``.ci/run`` of their own,
before pytest: run inside the suite they were its slowest tests.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
ENTRY_POINTS = (
    "eagle_tui.core.sim.serve",           # python -m eagle_tui.core.sim
    "eagle_tui.core.batches.worker",      # the detached worker (loads a tokenizer lazily)
    "eagle_tui.core.health.watcher",
    "eagle_tui.core.capture.engine",
    "eagle_tui.tui.cli.sim",              # eagle-tui sim
    "eagle_tui.tui.cli.watch",
    "eagle_tui.tui.cli.diagnose",
    "eagle_tui.tui.cli.status",
    "eagle_tui.tui.demokeeper",           # cleans up after the demo; must start at once
    "eagle_tui.tui.cli.capture",
    "eagle_tui.tui.cli.batches",
    "eagle_tui.tui.cli.export",           # eagle-tui export: parquet and JSON, nothing else
)
WITHOUT_TEXTUAL_OR_TRANSFORMERS = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
    heavy = [m for m in ("textual", "transformers") if m in sys.modules]
    if heavy:
        raise SystemExit(f"{name} imports {', '.join(heavy)}")
"""


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_entry_point_imports_light(module: str) -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_TEXTUAL_OR_TRANSFORMERS, module],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    comment = next(i for i, line in enumerate(readme)
                   if line.startswith("# install and run the tests"))
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-1] == readme[comment + 1]
    for step in ("ruff check .", "lint-imports", "mypy", "pytest"):  # the checks run in CI
        assert f".venv/bin/{step}" in ci[-1] or f"-m {step}" in ci[-1], step
