"""JSONL exports are byte for byte what the row-at-a-time encoder of commit a1c00fb wrote;
the ids are still checked on every row group.

The column-wide encoder (issue 23) must not change a byte. The sha256 values below are of
files exported by a1c00fb's code from these same batches: the two batch fixtures written by
b53df5b (single-turn and multi-turn), and batches written here with the export tests' own
helpers (a multi-turn batch beside a single-turn one, sample ids that need JSON escaping,
masks starting at 0 and at the row's end, a held-out split). JSONL bytes depend only on the
rows, so they hold across pyarrow versions; parquet files embed the writer's version, so
they were compared with ``cmp`` against a1c00fb's by hand (issue 23's closing note).
"""

from __future__ import annotations

import hashlib
import random
import shutil
from dataclasses import replace
from pathlib import Path

import msgspec
import pyarrow as pa
import pytest
from export_helpers import make_row, make_turn_row, write_batch

from eagle_tui.core.export import output
from eagle_tui.core.export.options import DEFAULT_DROP_FLAGS, ExportOptions, RowFilter
from eagle_tui.core.export.run import export
from eagle_tui.core.export.tally import invalid_reasons
from eagle_tui.core.shards.manifest import IdentityExtra, Manifest

FIXTURES = Path(__file__).parent.parent / "fixtures" / "written_by_b53df5b"
KEEP_ALL = RowFilter.build(keep_flags=DEFAULT_DROP_FLAGS)
STOP_ONLY = RowFilter.build(finish=["stop"], drop_flags=["tool_call"])

# (sources, options, sha256 of a1c00fb's file, rows)
CASES = [
    (["fixture"], ExportOptions("speculators"),
     "fe9d3ee8626c1498ae62207a8f43f3320d56cc8ddf254ec9269889264fbd9ce7", 3),
    (["fixture"], ExportOptions("specforge"),
     "7a3c9c71267e7dda575c89346cf5d36d1a379df2b4d882f61ed279324ea843b3", 3),
    (["fixture-mt"], ExportOptions("speculators"),
     "e762d7908fa79b59c9728d64ff09963ec1cf685d1f21bb320a5b5d63bd5c0d25", 3),
    (["a", "b"], ExportOptions("speculators", filter=KEEP_ALL),
     "182e28003403bdda448af7452200e58de4be91e6551b5b4857f79b3d1068b14e", 142),
    (["a", "b"], ExportOptions("specforge", "prompt-1", STOP_ONLY),
     "e4e99d26f3339700b7d2af90ad1270496bd744171036d3db557b063a5d6a2d1c", 43),
    (["odd"], ExportOptions("speculators", "prompt-1", KEEP_ALL),
     "05e68c4f613119c2f218273f379a6ecc5130033567434ba0c6d40d198fdc2cb7", 32),
    (["odd"], ExportOptions("specforge", filter=KEEP_ALL),
     "7e8cb5bcd48060345f40e78c861d3fd1ad55d9dc6457c55805aebf45613cf13d", 32),
    (["held"], ExportOptions("speculators"),
     "14be65cb20f77d5c7f1160989924237ee81a5f8402b09556b33224402472ea52", 31),
    (["held"], ExportOptions("speculators", include_held_out=True),
     "6748dba708306d60607fa1d91254a4cdc6a1f6386dd5c0134e7bcf62993aef94", 48),
]


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The batches a1c00fb exported, written the same way."""
    root = tmp_path_factory.mktemp("golden")
    shutil.copytree(FIXTURES / "batch", root / "fixture")
    shutil.copytree(FIXTURES / "batch-multiturn", root / "fixture-mt")
    write_batch(root / "a", [make_row(i) for i in range(97)])
    write_batch(root / "b", [make_turn_row(i) for i in range(45)], schema_version=2)
    odd = [replace(make_row(i, prefix='é"\\\u2028\x7f<'), prompt_len=prompt)
           for i, prompt in zip(range(30), [0, 1, 2, 3] * 8, strict=False)]
    odd.append(replace(make_row(31, prefix="z"), input_ids=[0], prompt_len=1))
    odd.append(replace(make_row(32, prefix="z"), input_ids=[7, 163839], prompt_len=2, flags=[]))
    write_batch(root / "odd", odd)
    write_batch(root / "held", [make_row(i, prefix="h") for i in range(80)])
    manifest = Manifest.load(root / "held")
    manifest.config = msgspec.structs.replace(manifest.config,
                                              extra=IdentityExtra(held_out=0.3))
    manifest.save_atomic()
    return root


@pytest.mark.parametrize(("names", "options", "sha256", "rows"), CASES)
def test_jsonl_bytes_are_those_a1c00fb_wrote(sources: Path, tmp_path: Path, names: list[str],
                                             options: ExportOptions, sha256: str,
                                             rows: int) -> None:
    out = tmp_path / "train.jsonl"
    result = export([sources / name for name in names], out, options)
    data = out.read_bytes()
    assert data.count(b"\n") == rows == result.counts.kept
    assert hashlib.sha256(data).hexdigest() == sha256


@pytest.mark.parametrize(("names", "options", "sha256", "rows"), [CASES[3], CASES[4]])
def test_dropping_written_pages_from_the_cache_changes_no_byte(
        sources: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: list[str],
        options: ExportOptions, sha256: str, rows: int) -> None:
    """The export drops its written pages from the page cache every 64 MiB; here every
    KiB, so the small golden files go through it many times."""
    monkeypatch.setattr(output, "DROP_BEHIND_BYTES", 1024)
    out = tmp_path / "train.jsonl"
    result = export([sources / name for name in names], out, options)
    assert result.bytes > 10 * 1024
    assert hashlib.sha256(out.read_bytes()).hexdigest() == sha256 == result.sha256


@pytest.mark.parametrize(("names", "row_filter"), [
    (["a", "b"], STOP_ONLY), (["odd"], RowFilter.build(drop_flags=["tool_call"])),
    (["held"], RowFilter.build())])
def test_parquet_bytes_are_those_arrows_take_gives(
        sources: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: list[str],
        row_filter: RowFilter) -> None:
    """Kept rows are joined from slices, not copied by Arrow's ``filter``: the same file."""
    options = ExportOptions("parquet", filter=row_filter)
    ours = export([sources / name for name in names], tmp_path / "ours.parquet", options)
    monkeypatch.setattr(output, "kept_rows",
                        lambda table, kept: table.take(pa.array(kept, pa.int64())))
    arrows = export([sources / name for name in names], tmp_path / "take.parquet", options)
    assert 0 < ours.counts.kept < ours.counts.rows
    assert (tmp_path / "ours.parquet").read_bytes() == (tmp_path / "take.parquet").read_bytes()
    assert ours.sha256 == arrows.sha256


def test_kept_rows_are_the_rows_asked_for_in_order() -> None:
    table = pa.table({"ids": pa.array([[i] * (i % 5) for i in range(40)], pa.list_(pa.int32())),
                      "name": [f"r{i}" for i in range(40)]})
    rng = random.Random(7)
    cases = [[0], [39], list(range(40)), [0, 39], list(range(1, 39)), list(range(0, 40, 2))]
    cases += [sorted(rng.sample(range(40), rng.randint(1, 40))) for _ in range(50)]
    for kept in cases:
        assert output.kept_rows(table, kept).equals(table.take(pa.array(kept, pa.int64())))


def test_a_missing_id_drops_its_row_as_out_of_range() -> None:
    """A shard written by another tool may hold a null id; its row is not the model's
    tokens, and the min/max shortcut must not let it through."""
    table = pa.table({
        "input_ids": pa.array([[1, 2], [3, None], [4, 5]], pa.list_(pa.int32())),
        "prompt_len": pa.array([1, 1, 1], pa.int32()),
    })
    assert invalid_reasons(table, 100) == [None, "id_out_of_range", None]
    assert invalid_reasons(table, None) == [None, "id_out_of_range", None]
    assert invalid_reasons(table.slice(0, 1), 2) == ["id_out_of_range"]
