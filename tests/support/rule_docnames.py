"""The docstring-names rule of ``tests/test_source_rules.py``: docstrings, package maps and
``prog`` strings name only modules that exist.

Modules move (``core.batches.worker`` printed ``prog="python -m core.batches.worker"`` long
after the path stopped working; package maps listed modules that had moved to ``tui/cli``).
Each docstring and ``prog=`` string of ``core``, ``tui``, ``scripts`` and ``tests`` is read and
each name in it checked:

- a dotted name (``eagle_tui.core.x.y``, ``core.x.y``, ``tui.x``) resolves to a module, or to
  a name defined at the top of the longest module it starts with; after ``python -m`` it is
  the import name (``eagle_tui.core…``: no bare ``core`` or ``tui`` can be imported);
- a path (``core/x/y.py``, ``tui/x.py``) is a file of the repository;
- in a package's ``__init__`` docstring, the modules a package map lists (``- ``a`` /
  ``b``: what they do``) exist in that package, and ``module.Name`` references resolve.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from support.sourcerules import ROOT, Source
from support.sources import parsed_file

PACKAGES = {"core": ROOT / "core", "tui": ROOT / "tui"}

# In any docstring: a module run by ``python -m``, a dotted name, a file path.
RUN_MODULE = re.compile(r"python3? -m ([\w.]+)")
DOTTED = re.compile(r"(?<![\w./-])(?:eagle_tui\.)?(?:core|tui)(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./-])(?:core|tui)/[\w/.-]*?\.py\b")
DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
FILE_SUFFIXES = {"json", "jsonl", "py", "md", "log", "txt", "toml", "parquet", "lock", "gz"}


def texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring and ``prog=`` string in ``path``."""
    source = path.read_text(encoding="utf-8")
    tree = parsed_file(path)
    scopes: list[ast.AST] = [tree]
    while scopes:  # modules, classes and functions: only they have docstrings
        scope = scopes.pop()
        body = getattr(scope, "body", [])
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            yield body[0].value.lineno, body[0].value.value
        scopes.extend(node for node in body if isinstance(node, DEFINITIONS))
    if "prog=" in source:
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "prog" \
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                yield node.value.lineno, node.value.value


@cache
def module_file(dotted: str) -> Path | None:
    """The file of module ``core.x.y`` / ``tui.x`` (``__init__.py`` for a package)."""
    top, *rest = dotted.split(".")
    base = PACKAGES[top].joinpath(*rest)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return base if base.is_dir() and not rest else None


@cache
def top_names(path: Path) -> frozenset[str]:
    """Names bound at the top of a module (definitions, assignments, imports)."""
    names: set[str] = set()
    for node in parsed_file(path).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def dotted_problem(name: str) -> str | None:
    """Why the dotted ``name`` names nothing, or None when it resolves."""
    parts = name.removeprefix("eagle_tui.").split(".")
    for cut in range(len(parts), 0, -1):
        found = module_file(".".join(parts[:cut]))
        if found is None:
            continue
        rest = parts[cut:]
        if not rest:
            return None
        if found.is_file() and rest[0] in top_names(found):
            return None
        return f"{'.'.join(parts[:cut])} has no module or name {rest[0]!r}"
    return "no such package"


# In a package's map: an item, the names ticked in it, a ``module.Name`` reference.
MAP_ITEM = re.compile(r"^\s*- (.*?):(?:\s|$)")
TICKED = re.compile(r"``([^`]+)``")
RELATIVE = re.compile(r"^([a-z_]\w*)\.([A-Za-z_]\w*)$")


def package_map_problems(path: Path, text: str) -> Iterator[str]:
    """Modules a package's docstring lists (or names as ``module.Name``) that it lacks."""
    package = path.parent
    dotted = ".".join(package.relative_to(ROOT).parts)

    def is_module(name: str) -> bool:
        name = name.rstrip("/")
        if "*" in name:
            return any(package.glob(name + ".py"))
        return (package / f"{name}.py").is_file() or (package / name).is_dir()

    for line in text.splitlines():
        item = MAP_ITEM.match(line)
        if item is not None:
            for name in TICKED.findall(item.group(1)):
                if not is_module(name):
                    yield f"the package map lists {name!r}, which {dotted} does not have"
        for name in TICKED.findall(line):
            relative = RELATIVE.match(name)
            if relative is not None and is_module(relative.group(1)) \
                    and relative.group(2) not in FILE_SUFFIXES:  # ``failures.jsonl``
                problem = dotted_problem(f"{dotted}.{name}")
                if problem is not None:
                    yield f"{name!r}: {problem}"


def problems_in(source: Source) -> Iterator[tuple[int, str]]:
    """(line, problem) of each name in the docstrings and ``prog=`` strings of ``source``."""
    path = source.path
    for line, text in texts(path):
        for match in DOTTED.finditer(text):
            problem = dotted_problem(match.group())
            if problem is not None:
                yield line, f"{match.group()!r}: {problem}"
        for match in RUN_MODULE.finditer(text):
            if match.group(1).startswith(("core.", "tui.")):
                yield line, (f"{match.group()!r}: the import name is "
                             f"eagle_tui.{match.group(1)} (a bare core/tui is not importable)")
        for match in PATH.finditer(text):
            if not (ROOT / match.group()).is_file():
                yield line, f"{match.group()!r} is not a file of the repository"
        if path.name == "__init__.py":
            yield from ((line, problem) for problem in package_map_problems(path, text))
