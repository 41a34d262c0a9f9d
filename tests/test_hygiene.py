"""Project rules that a reviewer would otherwise have to remember.

- the dependency directions of pyproject.toml's ``[tool.importlinter]`` hold (``lint-imports``;
  docs/architecture.md explains them): core never imports the tui package or textual, the
  layers, the sim and the client apart, no parquet for watching or batch bookkeeping;
- no module imports ``core``, ``tui`` or ``themes`` by a bare top-level name;
- the few process entry points import without ``textual`` (core works without a screen) or
  ``transformers`` (heavy; only code that really loads a tokenizer imports it, lazily): a
  static check cannot see that, since a function-level import is still an import edge;
- ``core`` and ``tui`` pass ``mypy --strict``; the whole tree passes ``ruff``.
"""

from __future__ import annotations

import re
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
BARE_IMPORT = re.compile(r"""(^\s*|["'])(from|import)\s+(core|tui|themes)\b""", re.MULTILINE)


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_entry_point_imports_light(module: str) -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_TEXTUAL_OR_TRANSFORMERS, module],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout


def test_no_bare_top_level_imports() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{source[:match.start()].count(chr(10)) + 1}"
        for folder in ("core", "tui", "tests", "scripts")
        for path in (ROOT / folder).rglob("*.py")
        for source in [path.read_text(encoding="utf-8")]
        for match in BARE_IMPORT.finditer(source)
    ]
    assert not offenders, f"import through eagle_tui.*: {offenders}"


def test_import_contracts_hold() -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_core_and_tui_type_check_strictly() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True,
                          cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_is_clean() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
