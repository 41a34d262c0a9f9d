"""The batch directory has one owner: ``core.shards.batchdir.layout`` spells every file name,
every other module asks it for paths, and docs/shard-format.md lists the same names."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support.sources import parsed_file

from eagle_tui.core.shards.batchdir import layout
from eagle_tui.core.shards.batchdir.layout import BatchDir, is_temp, shard_index

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "core" / "shards" / "batchdir" / "layout.py"
NAMES = {
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
        return isinstance(right, ast.Constant) and right.value in NAMES
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in PATH_CALLS and any(
            isinstance(arg, ast.Constant) and arg.value in NAMES for arg in node.args)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) \
        and bool(SHARD_FILE.fullmatch(node.value))


def test_no_module_but_the_layout_spells_a_batch_directory_path() -> None:
    offenders = []
    for folder in ("core", "tui"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == LAYOUT:
                continue
            tree = parsed_file(path)
            offenders += [f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
                          for node in ast.walk(tree) if joins_a_batch_name(node)]
    assert not offenders, f"ask BatchDir for these paths: {offenders}"


def test_the_check_above_can_fail() -> None:
    spelled = ast.parse('out / "failures.jsonl"; os.path.join(out, "control.sock"); '
                        'name = "part-{index:05d}.parquet"')
    assert sum(joins_a_batch_name(node) for node in ast.walk(spelled)) == 3
    assert not any(joins_a_batch_name(n) for n in ast.walk(ast.parse('t.add_row("shards", 1)')))


def test_every_name_is_in_the_documented_tree() -> None:
    docs = (ROOT / "docs" / "shard-format.md").read_text(encoding="utf-8")
    tree = docs.split("## A batch directory", 1)[1].split("```", 2)[1]
    missing = [name for name in sorted(NAMES) if name not in tree]
    assert not missing, f"docs/shard-format.md's batch directory tree lacks {missing}"


def test_paths_and_shard_names(tmp_path: Path) -> None:
    batch = BatchDir.of(tmp_path / "out")
    assert batch.manifest == tmp_path / "out" / "manifest.json"
    assert batch.shard_file(7) == tmp_path / "out" / "shards" / "part-00007.parquet"
    assert batch.shard("part-00007.parquet") == batch.shard_file(7)
    assert batch.lock.name == ".eagle-tui.lock" and batch.untrusted.parent == batch.root
    assert shard_index("part-00007.parquet") == 7 == shard_index("part-00007.parquet.tmp")
    assert shard_index("part-7.txt") is None and shard_index("notes.parquet") is None
    assert is_temp(batch.shard("part-00001.parquet.tmp")) and not is_temp(batch.shard_file(1))
    assert batch.shard_dir_files() == [] and not batch.holds_batch()
    batch.shards.mkdir(parents=True)
    (batch.shards / "b").write_text("")
    (batch.shards / "a").write_text("")
    (batch.shards / "sub").mkdir()
    assert [p.name for p in batch.shard_dir_files()] == ["a", "b"]


@pytest.mark.parametrize("name", sorted(NAMES))
def test_names_are_plain_file_names(name: str) -> None:
    assert "/" not in name and name == name.strip()
