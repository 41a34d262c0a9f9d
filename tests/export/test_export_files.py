"""The files an export leaves: byte-identical twice, a manifest that lists its sources with
checksums, nothing that looks complete after a failure, and clear errors for bad input."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from export_helpers import make_row, read_jsonl, shard_rows, write_batch

from eagle_tui.core.errors import ConfigError, ExportError, ShardError
from eagle_tui.core.export import output
from eagle_tui.core.export.manifest import ExportManifest
from eagle_tui.core.export.options import ExportOptions, RowFilter
from eagle_tui.core.export.run import export
from eagle_tui.core.shards.manifest import Manifest


@pytest.fixture
def batches(tmp_path: Path) -> list[Path]:
    first = write_batch(tmp_path / "a", [make_row(i, "a") for i in range(60)])
    second = write_batch(tmp_path / "b", [make_row(i, "b") for i in range(25)], max_rows=10)
    return [first, second]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("fmt", ["speculators", "specforge", "parquet"])
def test_exporting_twice_gives_byte_identical_files(
    batches: list[Path], tmp_path: Path, fmt: Any
) -> None:
    one, two = tmp_path / "one" / "train.out", tmp_path / "two" / "train.out"
    one.parent.mkdir()
    two.parent.mkdir()
    export(batches, one, ExportOptions(fmt, max_length=20))
    export(batches, two, ExportOptions(fmt, max_length=20))
    assert one.read_bytes() == two.read_bytes()
    assert (one.parent / "train.out.manifest.json").read_bytes() == \
        (two.parent / "train.out.manifest.json").read_bytes()
    again = export(batches, one, ExportOptions(fmt, max_length=20, force=True))
    assert again.sha256 == sha256(two)


def test_manifest_lists_sources_checksums_filter_and_counts(
    batches: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "train.jsonl"
    result = export(batches, out, ExportOptions("speculators"))
    manifest = json.loads((tmp_path / "train.jsonl.manifest.json").read_text())
    assert manifest["format"] == "speculators" and manifest["mask_start"] == "prompt"
    assert manifest["data"] == {"file": "train.jsonl", "rows": result.counts.kept,
                                "bytes": out.stat().st_size, "sha256": sha256(out)}
    assert [s["batch"] for s in manifest["sources"]] == [str(b.resolve()) for b in batches]
    for source, batch in zip(manifest["sources"], batches, strict=True):
        listed = Manifest.load(batch).shards
        assert [s["name"] for s in source["shards"]] == [info.name for info in listed]
        for entry in source["shards"]:
            assert entry["sha256"] == sha256(batch / "shards" / entry["name"])
    assert manifest["counts"]["rows"] == 85
    assert manifest["counts"]["dropped"] == result.counts.dropped
    assert manifest["filter"]["drop_flags"] == [
        "aborted", "count_mismatch", "prompt_count_mismatch", "bad_token_id",
        "over_max_new_tokens"]
    assert manifest["tokenizer"]["fingerprint"] == "ab" * 32
    assert not any(key.endswith("_at") for key in _keys(manifest))  # no clock in it


def _keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [*value, *(k for v in value.values() for k in _keys(v))]
    if isinstance(value, list):
        return [k for v in value for k in _keys(v)]
    return []


def test_several_batches_follow_each_other_in_the_order_given(
    batches: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "t.jsonl"
    keep_all = RowFilter(frozenset())
    export(list(reversed(batches)), out, ExportOptions("speculators", filter=keep_all))
    expected = [r["sample_id"] for b in reversed(batches) for r in shard_rows(b)]
    assert [r["id"] for r in read_jsonl(out)] == expected


def test_a_failure_midway_leaves_no_output_and_keeps_the_old_one(
    batches: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "train.jsonl"
    export(batches, out, ExportOptions("specforge"))
    before = out.read_bytes(), (tmp_path / "train.jsonl.manifest.json").read_bytes()
    calls = {"n": 0}
    real_write = output.ExportSink.write

    def failing_write(self: output.ExportSink, table: Any, keep: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        real_write(self, table, keep)

    monkeypatch.setattr(output.ExportSink, "write", failing_write)
    with pytest.raises(ExportError, match=r"disk full \(ENOSPC\)"):
        export(batches, out, ExportOptions("specforge", "prompt", force=True))
    assert (out.read_bytes(), (tmp_path / "train.jsonl.manifest.json").read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [
        "train.jsonl", "train.jsonl.manifest.json"]


def test_an_existing_output_needs_force(batches: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "train.jsonl"
    out.write_text("mine\n")
    with pytest.raises(ExportError, match="already exists; pass --force"):
        export(batches, out, ExportOptions("speculators"))
    assert out.read_text() == "mine\n"


def test_not_a_batch_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no manifest.*batch directory"):
        export([tmp_path / "empty"], tmp_path / "t.jsonl", ExportOptions("speculators"))
    with pytest.raises(ConfigError, match="not a directory"):
        export([tmp_path / "missing"], tmp_path / "t.jsonl", ExportOptions("speculators"))


def test_a_corrupt_shard_is_named_with_what_to_do(batches: list[Path], tmp_path: Path) -> None:
    shard = batches[1] / "shards" / Manifest.load(batches[1]).shards[1].name
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    out = tmp_path / "t.jsonl"
    with pytest.raises(ShardError, match=rf"{shard.name}.*sha256.*corrupt.*capture --resume"):
        export(batches, out, ExportOptions("speculators"))
    assert not out.exists() and not list(tmp_path.glob("t.jsonl*"))


def test_a_missing_shard_is_named(batches: list[Path], tmp_path: Path) -> None:
    shard = batches[0] / "shards" / Manifest.load(batches[0]).shards[0].name
    shard.unlink()
    with pytest.raises(ShardError, match=rf"{shard.name}.*missing"):
        export(batches, tmp_path / "t.jsonl", ExportOptions("speculators"))


def test_batches_sharing_sample_ids_are_refused(batches: list[Path], tmp_path: Path) -> None:
    copy = tmp_path / "a-copy"
    shutil.copytree(batches[0], copy)
    with pytest.raises(ExportError, match=r"sample a00000 is in both .*/a and .*/a-copy"):
        export([batches[0], copy], tmp_path / "t.jsonl", ExportOptions("speculators"))
    with pytest.raises(ConfigError, match="given twice"):
        export([batches[0], batches[0]], tmp_path / "t.jsonl", ExportOptions("speculators"))


def test_a_sample_twice_inside_one_batch_is_refused(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "dup", [make_row(1), make_row(2), make_row(1)])
    with pytest.raises(ExportError, match=r"sample s00001 is stored twice in batch"):
        export([batch], tmp_path / "t.jsonl", ExportOptions("speculators"))


def test_batches_of_different_tokenizers_are_refused(tmp_path: Path) -> None:
    first = write_batch(tmp_path / "a", [make_row(1, "a")])
    second = write_batch(tmp_path / "b", [make_row(1, "b")], fingerprint="cd" * 32)
    with pytest.raises(ExportError, match="different tokenizers"):
        export([first, second], tmp_path / "t.jsonl", ExportOptions("speculators"))


def test_manifest_is_one_struct_written_as_sorted_json_dumps_wrote_it(
    batches: list[Path], tmp_path: Path
) -> None:
    """Read back through ``ExportManifest``; the bytes are those ``json.dumps(indent=1,
    sort_keys=True, ensure_ascii=False)`` wrote before the manifest was a struct."""
    out = tmp_path / "train.jsonl"
    result = export(batches, out, ExportOptions("speculators", max_length=20))
    data = (tmp_path / "train.jsonl.manifest.json").read_bytes()
    manifest = ExportManifest.decode(data)
    assert (manifest.data.name, manifest.data.rows) == ("train.jsonl", result.counts.kept)
    assert manifest.counts == result.counts and manifest.counts.length is not None
    assert [s.batch for s in manifest.sources] == [str(b.resolve()) for b in batches]
    assert manifest.encode() == data
    assert data == (json.dumps(json.loads(data), indent=1, sort_keys=True,
                               ensure_ascii=False) + "\n").encode()
