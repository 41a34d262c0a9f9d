"""The literal rules of ``tests/test_source_rules.py``: outside text enters the dashboard only
through ``tui.render.literal`` (issue 18). A scan of the dashboard's source finds no
``Text``/``Content`` built from a string, no toast, static, label, table cell, log line,
palette command or border title given a string, unless it is a constant or comes from a
``literal`` constructor. A line may say why its value is already safe with a ``# literal:``
comment (the log pane converts each line once, where it is read). The verbs that print Rich
renderables print them through ``literal.Literal``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from support.sourcerules import Source

LITERAL_MODULES = {"tui/render/literal.py", "tui/render/literal_rich.py"}
BUILDERS = {"Text", "Content"}
BUILDER_METHODS = {"assemble", "styled", "from_markup", "from_ansi", "from_text",
                   "from_rich_text"}
SHOWN_CALLS = {"notify", "update_cell", "write_line", "write_lines", "add_row", "add_column",
               "add_columns", "SystemCommand", "Static", "Label", "Button", "Option", "Select",
               "set_options", "update"}
SHOWN_ARGS = {"SystemCommand": slice(0, 2), "update_cell": slice(2, 3), "add_row": slice(None),
              "add_columns": slice(None)}
"""Positional arguments that are shown (the first for the others)."""
SHOWN_KEYWORDS = {"title", "label", "message", "placeholder", "tooltip", "help", "prompt"}
SHOWN_ATTRIBUTES = {"border_title", "border_subtitle", "tooltip", "title", "sub_title"}
LITERAL = {"shown", "content", "styled", "assemble", "lines", "rich_text", "Literal"}
NOT_TEXT = {"len", "int", "float", "bool", "tuple", "list", "dict", "set", "sorted", "min",
            "max", "sum", "any", "all", "isinstance", "range", "enumerate", "zip"}


def is_dashboard(name: str) -> bool:
    """The dashboard's modules: not the verbs (``tui/cli``) nor the literal modules."""
    return not name.startswith("tui/cli/") and name not in LITERAL_MODULES


def is_literal_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    owner = func.value if isinstance(func, ast.Attribute) else None
    return name in LITERAL and (owner is None or getattr(owner, "id", "") == "literal")


def is_safe(node: ast.AST) -> bool:
    """A value that may be shown: a constant, a module constant, what a ``literal``
    constructor made, or what a call returns (built, and checked, where it is made)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id.isupper() or node.id in ("None", "True", "False")
    if isinstance(node, ast.Attribute):
        return node.attr.isupper()
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return is_literal_call(node) or name not in ("str", "repr", "format", "join", "strip")
    if isinstance(node, ast.IfExp):
        return is_safe(node.body) and is_safe(node.orelse)
    if isinstance(node, ast.Starred):
        return is_safe(node.value)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(is_safe(item) for item in node.elts)
    if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
        return is_safe(node.elt)
    return False


def builds_from_a_string(node: ast.Call) -> bool:
    """``Text(s)``, ``Content(s)``, ``Content.assemble(…)`` … with anything but constants."""
    func = node.func
    if isinstance(func, ast.Name) and func.id in BUILDERS:
        pass
    elif not (isinstance(func, ast.Attribute) and func.attr in BUILDER_METHODS
              and getattr(func.value, "id", "") in BUILDERS):
        return False
    return not all(isinstance(arg, ast.Constant) for arg in node.args)


def shows_a_raw_value(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in SHOWN_CALLS:
        return False
    if name == "update" and not _updates_a_widget(func):
        return False
    shown = node.args[SHOWN_ARGS.get(name, slice(0, 1))]
    values = [*shown, *(k.value for k in node.keywords if k.arg in SHOWN_KEYWORDS)]
    return not all(is_safe(value) for value in values)


def _updates_a_widget(func: ast.expr) -> bool:
    """``self.update(…)`` in a widget, ``query_one(…).update(…)`` or ``widget.update(…)``
    (not a dict's or a set's update)."""
    receiver = func.value if isinstance(func, ast.Attribute) else None
    if isinstance(receiver, ast.Call):
        return getattr(receiver.func, "attr", "") == "query_one"
    return isinstance(receiver, ast.Name) and receiver.id in ("self", "partial", "static", "label")


def unsafe_text(source: Source) -> Iterator[tuple[int, str]]:
    """Where the dashboard shows or builds text from a value not made literal."""
    for node in ast.walk(source.tree):
        bad = ""
        if isinstance(node, ast.Call) and builds_from_a_string(node):
            bad = "builds text from a string"
        elif isinstance(node, ast.Call) and shows_a_raw_value(node):
            bad = "shows a value not made literal"
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr in SHOWN_ATTRIBUTES for t in node.targets
        ) and not is_safe(node.value):
            bad = "sets a title not made literal"
        if not bad:
            continue
        line = source.lines[node.lineno - 1]
        if "# literal:" not in line:
            yield node.lineno, f"{bad}: {line.strip()}"


def rich_printed_raw(source: Source) -> Iterator[tuple[int, str]]:
    """``out.print(x)``, ``Live(x)`` and ``live.update(x)`` in a verb that do not print
    ``Literal(x)`` (or JSON, whose escapes are already text)."""
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Call) and _prints_rich(node) and not _printed_literally(node):
            yield node.lineno, ast.unparse(node)[:80]


def _prints_rich(node: ast.Call) -> bool:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id == "Live"
    owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
    return isinstance(func, ast.Attribute) and (
        (func.attr == "print" and owner in ("out", "console"))
        or (func.attr == "update" and owner == "live"))


def _printed_literally(node: ast.Call) -> bool:
    if not node.args:
        return True
    first = node.args[0]
    name = getattr(first, "func", None)
    return isinstance(first, ast.Call) and (
        getattr(name, "id", "") == "Literal" or ast.unparse(first).startswith("json.dumps("))
