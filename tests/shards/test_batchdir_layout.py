"""The batch directory has one owner: ``core.shards.batchdir.layout`` spells every file name,
every other module asks it for paths (a rule of ``tests/test_source_rules.py``), and
docs/shard-format.md lists the same names."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.rule_small import LAYOUT_NAMES as NAMES

from eagle_tui.core.shards.batchdir.layout import BatchDir, is_temp, shard_index

ROOT = Path(__file__).resolve().parents[2]


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
