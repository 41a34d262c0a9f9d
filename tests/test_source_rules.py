"""Rules the project's own source keeps, each read by one harness
(``support.sourcerules``) and each shown able to fail on a sample that breaks it.

The finders: ``support.rule_small`` (bare imports, undeclared libraries, private library API,
batch-directory paths), ``support.rule_literal`` (outside text through ``literal``) and
``support.rule_docnames`` (names in docstrings exist).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import rule_docnames, rule_literal, rule_small
from support.sourcerules import Rule, sample_violations, sources, violations

PRIVATE_API_SAMPLE = (
    "from textual._compositor import CompositorUpdate\n"
    "import rich.control\n"
    "table = rich.control._CONTROL_STRIP_TRANSLATE\n"
    "ansi = style._ansi\n"
    "def _display(self): super()._display(); self._driver.write('x')\n"
)
LITERAL_SAMPLE = (
    "x = Content(name)\n"
    "y = Content.assemble(('a', 'b'), evidence)\n"
    "self.notify(f'{batch} started', title=label)\n"
    "self.query_one(Static).update(text)\n"
    "table.add_row(*cells)\n"
    "box.border_title = view.title\n"
    "Static(message)\n"
    "self.notify(literal.shown(message), title=TITLE)\n"
    "z = Content('\\n').join(literal.content(line) for line in lines)\n"
    "counts.update(more)\n"
    "table.add_row(*(literal.rich_text(cell) for cell in cells))\n"
    "table.update_cell(key, column, value)\n"
    "log.write_lines(lines)  # literal: made safe where they are read\n"
)
DOCSTRING_SAMPLE = (
    '"""Runs ``core.health.cli`` (moved), reads ``core.urls.NoSuchThing``;\n'
    "see core/nowhere.py, and ``eagle_tui.core.urls.ServerURL`` (exists).\"\"\"\n"
    "\n"
    "def f() -> None:\n"
    '    """``python -m core.batches.worker`` is not importable."""\n'
)

RULES = (
    Rule("bare_imports", "import through eagle_tui.*", ("core", "tui", "tests", "scripts"),
         rule_small.bare_imports, "x = 1\nfrom core.urls import ServerURL\nimport tui\n",
         (2, 3), pattern="**/*.py"),
    Rule("declared_libraries", "declare in [project] dependencies", ("core", "tui"),
         rule_small.undeclared_imports,
         "import numpy as np\nfrom yaml import safe_load\nimport json\nimport msgspec.json\n",
         (2,), pattern="**/*.py"),
    Rule("private_library_api", "private library API", ("tui",), rule_small.private_uses,
         PRIVATE_API_SAMPLE, (1, 3, 4), pattern="**/*.py"),
    Rule("batch_paths_in_layout", "ask BatchDir for these paths", ("core", "tui"),
         rule_small.batch_paths,
         'out / "failures.jsonl"; os.path.join(out, "control.sock")\n'
         'name = "part-{index:05d}.parquet"\nt.add_row("shards", 1)\n',
         (1, 1, 2), keep=lambda name: name != "core/shards/batchdir/layout.py",
         pattern="**/*.py"),
    Rule("dashboard_text_through_literal", "use tui.render.literal", ("tui",),
         rule_literal.unsafe_text, LITERAL_SAMPLE, (1, 2, 3, 4, 5, 6, 7, 12),
         keep=rule_literal.is_dashboard, sample_name="tui/widget.py", pattern="**/*.py"),
    Rule("verbs_print_through_literal", "print through tui.render.literal_rich.Literal",
         ("tui/cli",), rule_literal.rich_printed_raw,
         "out.print(table)\nout.print(Literal(table))\nLive(x)\n"
         "live.update(json.dumps(x))\nconsole.print()\n", (1, 3)),
    Rule("docstring_names_exist", "name modules that exist", ("core", "tui", "scripts", "tests"),
         rule_docnames.problems_in, DOCSTRING_SAMPLE, (1, 1, 1, 5),
         keep=lambda name: "fixtures" not in name.split("/")
         and name != "tests/support/rule_docnames.py", pattern="**/*.py"),  # its examples
)


@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_the_source_keeps_the_rule(rule: Rule) -> None:
    assert len(list(sources(rule))) >= 10, "the rule reads almost nothing: folders, pattern?"
    found = violations(rule)
    assert not found, f"{rule.advice}:\n" + "\n".join(found)


@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_the_rule_finds_its_sample(rule: Rule, tmp_path: Path) -> None:
    assert sample_violations(rule, tmp_path) == list(rule.sample_lines)


@pytest.mark.parametrize(("name", "resolves"), [
    ("eagle_tui.core.urls", True),
    ("core.urls.ServerURL", True),
    ("core.health.state.WatchState.update", True),
    ("tui.cli.main", True),
    ("core.batches.worker", True),
    ("core.health.cli", False),
    ("core.urls.NoSuchThing", False),
    ("tui.nowhere", False),
])
def test_the_check_tells_names_that_exist_from_names_that_do_not(name: str,
                                                                 resolves: bool) -> None:
    assert (rule_docnames.dotted_problem(name) is None) is resolves


def test_a_package_map_naming_a_missing_module_fails() -> None:
    text = ("Map:\n\n- ``engine`` / ``lock``: the engine; a lock that moved\n"
            "- ``cli_*``: verbs that moved\n\n``engine.CaptureEngine`` runs, ``engine.Gone`` not")
    found = list(rule_docnames.package_map_problems(
        rule_docnames.ROOT / "core" / "capture" / "__init__.py", text))
    assert len(found) == 3 and "'lock'" in found[0] and "'cli_*'" in found[1]
    assert "'Gone'" in found[2]
