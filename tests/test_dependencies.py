"""pyproject.toml bounds every dependency to the versions tested (read with ``packaging``,
pytest's own dependency, not by hand). That it declares every library the shipped code
imports is a rule of ``tests/test_source_rules.py``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
RUNTIME = [Requirement(line) for line in PROJECT["dependencies"]]
EVERY = RUNTIME + [Requirement(line) for extra in PROJECT["optional-dependencies"].values()
                   for line in extra]
UPPER = {"<", "<=", "==", "~="}


def test_every_dependency_has_an_upper_bound() -> None:
    unbounded = [str(r) for r in EVERY if not {s.operator for s in r.specifier} & UPPER]
    assert not unbounded, f"bound these to the versions tested: {unbounded}"
