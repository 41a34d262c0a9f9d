"""The dashboard and the verbs use no private (``_name``) module or attribute of a library
(issue 18): Textual and Rich are pinned to a tested minor, and a private name may change in
any release of either. Attributes of the project's own objects (``self._x``) are its own."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from support.sources import parse_python

TUI = Path(__file__).resolve().parents[2] / "tui"
ALLOWED = {
    "os._exit",  # documented public API (exit without clean-up), despite its name
    "argparse._ArgumentGroup",  # in annotations only (never evaluated: postponed annotations)
    "argparse._ActionsContainer",
}


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(source: str) -> Iterator[tuple[int, str]]:
    for node in ast.walk(parse_python(source)):
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


def test_no_private_library_api_in_the_dashboard_or_the_verbs() -> None:
    found = [
        f"{path.relative_to(TUI.parent)}:{line}: {used}"
        for path in sorted(TUI.rglob("*.py"))
        for line, used in private_uses(path.read_text(encoding="utf-8"))
    ]
    assert not found, "private library API:\n" + "\n".join(found)


def test_the_scan_sees_what_the_old_code_did() -> None:
    old = (
        "from textual._compositor import CompositorUpdate\n"
        "import rich.control\n"
        "table = rich.control._CONTROL_STRIP_TRANSLATE\n"
        "ansi = style._ansi\n"
        "def _display(self): super()._display(); self._driver.write('x')\n"
    )
    assert [line for line, _ in private_uses(old)] == [1, 3, 4]
