"""Project rules that a reviewer would otherwise have to remember.

- every ``core`` module imports in a fresh interpreter without pulling in
  ``textual`` (core works without a screen) or ``transformers`` (heavy; only
  code that really loads a tokenizer may import it, and lazily);
- ``core`` passes ``mypy --strict``; the whole tree passes ``ruff``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE_MODULES = sorted(
    "eagle_tui." + ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for path in (ROOT / "core").rglob("*.py")
)

PROBE = """
import importlib, sys
importlib.import_module(sys.argv[1])
heavy = [name for name in ("textual", "transformers") if name in sys.modules]
print(",".join(heavy))
"""


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_light(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module], capture_output=True, text=True, cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"{module} imports {done.stdout.strip()}"


def test_core_type_checks_strictly() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy"], capture_output=True, text=True,
        cwd=ROOT, timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_is_clean() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "."], capture_output=True, text=True, cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
