"""The smaller rules of ``tests/test_source_rules.py``, one finder each.

- imports go through ``eagle_tui.*``, never a bare ``core``, ``tui`` or ``themes``;
- every library the shipped code imports is declared in ``[project] dependencies`` (a library
  that only arrives through another's requirements can leave, or change major, without us);
- the dashboard and the verbs use no private (``_name``) module or attribute of a library
  (issue 18): Textual and Rich are pinned to a tested minor, and a private name may change in
  any release of either; attributes of the project's own objects (``self._x``) are its own;
- the batch directory has one owner: ``core.shards.batchdir.layout`` spells every file name
  and every other module asks it for paths.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from functools import cache

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from eagle_tui.core.shards.batchdir import layout
from support.sourcerules import ROOT, Source

BARE_IMPORT = re.compile(r"""(^\s*|["'])(from|import)\s+(core|tui|themes)\b""", re.MULTILINE)


def bare_imports(source: Source) -> Iterator[tuple[int, str]]:
    for match in BARE_IMPORT.finditer(source.text):
        yield source.text[:match.start()].count("\n") + 1, match.group().strip(" \t\n\"'")


@cache
def declared() -> frozenset[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return frozenset(canonicalize_name(Requirement(line).name)
                     for line in project["dependencies"])


@cache
def providers() -> dict[str, frozenset[str]]:
    from importlib.metadata import packages_distributions

    return {name: frozenset(canonicalize_name(d) for d in dists)
            for name, dists in packages_distributions().items()}


def is_declared(top: str) -> bool:
    if top in sys.stdlib_module_names or top == "eagle_tui":
        return True
    return bool(providers().get(top, frozenset({canonicalize_name(top)})) & declared())


def undeclared_imports(source: Source) -> Iterator[tuple[int, str]]:
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            tops = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops = [node.module.split(".")[0]]
        else:
            continue
        yield from ((node.lineno, top) for top in tops if not is_declared(top))


ALLOWED = {
    "os._exit",  # documented public API (exit without clean-up), despite its name
    "argparse._ArgumentGroup",  # in annotations only (never evaluated: postponed annotations)
    "argparse._ActionsContainer",
}


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(source: Source) -> Iterator[tuple[int, str]]:
    for node in ast.walk(source.tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("eagle_tui"):
                parts = [*node.module.split("."), *(alias.name for alias in node.names)]
                if any(private(part) for part in parts):
                    yield node.lineno, f"from {node.module} import …"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(private(part) for part in alias.name.split(".")):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.Attribute) and private(node.attr) and not _own(node.value):
            used = ast.unparse(node)
            if used not in ALLOWED:
                yield node.lineno, used


def _own(value: ast.expr) -> bool:
    """``self._x``, ``cls._x``, ``super()._x``: the object's own attribute."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return isinstance(value, ast.Call) and getattr(value.func, "id", "") == "super"


LAYOUT_NAMES = {
    layout.MANIFEST_NAME, layout.SHARDS_DIR, layout.FAILURES_NAME,
    layout.PREVIOUS_FAILURES_NAME, layout.REJECTS_NAME, layout.CAPTURE_LOG_NAME,
    layout.WORKER_LOG_NAME, layout.UNTRUSTED_DIR, layout.LOCK_NAME, layout.CONTROL_SOCKET_NAME,
}
SHARD_FILE = re.compile(r"part-\{?[^}]*\}?\.parquet|part-\d+\.parquet")
PATH_CALLS = {"joinpath", "join", "with_name", "Path", "open"}


def joins_a_batch_name(node: ast.AST) -> bool:
    """``x / "manifest.json"``, ``x.joinpath("shards")``, ``os.path.join(x, "capture.log")``
    or a shard file name pattern: a path built from a batch directory's file name."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        right = node.right
        return isinstance(right, ast.Constant) and right.value in LAYOUT_NAMES
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in PATH_CALLS and any(
            isinstance(arg, ast.Constant) and arg.value in LAYOUT_NAMES for arg in node.args)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) \
        and bool(SHARD_FILE.fullmatch(node.value))


def batch_paths(source: Source) -> Iterator[tuple[int, str]]:
    for node in ast.walk(source.tree):
        if joins_a_batch_name(node):
            yield getattr(node, "lineno", 0), ast.unparse(node)[:80]
