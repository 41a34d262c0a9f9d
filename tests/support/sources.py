"""Parsing the project's own Python source in tests, safely beside other threads.

CPython 3.11 counts the AST constructor's recursion depth in one interpreter-wide variable
(python/cpython#106905, per-thread only from 3.13). When a garbage collection during
``ast.parse`` runs a finaliser, the GIL can pass to another thread that parses too (3.11's
``traceback`` parses a source line to place its ``^^^`` marks, e.g. a background thread's
``log.exception``), and the first parse fails with a spurious ``RecursionError`` or
``SystemError: AST constructor recursion depth mismatch``. Under xdist a worker holds
threads left by earlier tests, so the source-scanning tests failed now and then under load.
With the collector paused no Python code runs inside the parse and the GIL stays with it.
"""

from __future__ import annotations

import ast
import gc
from functools import cache
from pathlib import Path


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` with the garbage collector paused for the call (see the module doc)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename)
    finally:
        if enabled:
            gc.enable()


@cache
def parsed_file(path: Path) -> ast.Module:
    """The tree of a source file, parsed once per test process (the trees are only read)."""
    return parse_python(path.read_text(encoding="utf-8"), str(path))
