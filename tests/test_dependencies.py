"""pyproject.toml bounds every dependency to the versions tested, and declares every library
the shipped code imports (a library that only arrives through another's requirements can
leave, or change major, without us).

Read with ``packaging`` (pytest's own dependency) and ``importlib.metadata``, not by hand.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
RUNTIME = [Requirement(line) for line in PROJECT["dependencies"]]
EVERY = RUNTIME + [Requirement(line) for extra in PROJECT["optional-dependencies"].values()
                   for line in extra]
UPPER = {"<", "<=", "==", "~="}


def test_every_dependency_has_an_upper_bound() -> None:
    unbounded = [str(r) for r in EVERY if not {s.operator for s in r.specifier} & UPPER]
    assert not unbounded, f"bound these to the versions tested: {unbounded}"


def imported_top_level(folder: Path) -> set[str]:
    """Top-level names of every absolute import in ``folder``'s modules."""
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_library_the_shipped_code_imports_is_declared() -> None:
    declared = {canonicalize_name(r.name) for r in RUNTIME}
    providers = packages_distributions()
    imported = (imported_top_level(ROOT / "core") | imported_top_level(ROOT / "tui"))
    third_party = sorted(imported - set(sys.stdlib_module_names) - {"eagle_tui"})
    missing = [name for name in third_party
               if not {canonicalize_name(d) for d in providers.get(name, [name])} & declared]
    assert third_party and not missing, f"declare in [project] dependencies: {missing}"


def test_the_detector_sees_an_undeclared_import(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import numpy as np\nfrom yaml import safe_load\n")
    assert imported_top_level(tmp_path) == {"numpy", "yaml"}
