"""Resume trusts only listed, checksum-valid shards; the manifest is replaced atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from shard_helpers import CONFIG, META, make_row, new_batch

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.core.shards.resume import (
    completed_sample_ids,
    drop_untrusted,
    remove_temp_files,
    scan_completed,
)
from eagle_tui.core.shards.writer import ShardWriter


class Crash(BaseException):
    """Stands for the process dying: nothing below it gets to clean up."""


def commit_shards(batch: Path, count: int, per_shard: int = 4) -> Manifest:
    manifest = Manifest.load(batch)
    with ShardWriter(batch, metadata=META, manifest=manifest, max_rows=per_shard) as writer:
        for i in range(count):
            writer.add(make_row(i))
    return manifest


def ids(start: int, stop: int) -> set[str]:
    return {f"s{i:06d}" for i in range(start, stop)}


def test_complete_shards_give_their_ids(batch_dir: Path) -> None:
    commit_shards(batch_dir, 10)
    scan = scan_completed(batch_dir)
    assert scan.sample_ids == ids(0, 10)
    assert [s.rows for s in scan.trusted] == [4, 4, 2]
    assert scan.ignored == ()
    assert completed_sample_ids(batch_dir) == ids(0, 10)


def test_crash_before_rename_leaves_a_temp_file_that_is_ignored(batch_dir: Path) -> None:
    commit_shards(batch_dir, 4)
    writer = ShardWriter(batch_dir, metadata=META, row_group_rows=1)
    writer.add(make_row(50))
    writer.add(make_row(51))  # two row groups in part-00001.parquet.tmp, never renamed
    scan = scan_completed(batch_dir)
    assert scan.sample_ids == ids(0, 4)
    (ignored,) = scan.ignored
    assert ignored.path.name == "part-00001.parquet.tmp" and "never completed" in ignored.reason
    assert remove_temp_files(scan) == [ignored.path] and not ignored.path.exists()
    writer.abort()


def test_crash_between_rename_and_manifest_update_leaves_an_unlisted_shard(
    batch_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit_shards(batch_dir, 4)
    writer = ShardWriter(batch_dir, metadata=META)
    writer.add(make_row(60))

    def crash(self: Manifest) -> None:
        raise Crash

    monkeypatch.setattr(Manifest, "save_atomic", crash)
    with pytest.raises(Crash):
        writer.flush()
    monkeypatch.undo()
    assert (batch_dir / "shards" / "part-00001.parquet").exists()
    scan = scan_completed(batch_dir)
    assert scan.sample_ids == ids(0, 4)  # s000060 is captured again on resume
    (ignored,) = scan.ignored
    assert "not listed" in ignored.reason and not ignored.listed
    # the next shard takes a fresh name rather than overwriting the unlisted one
    manifest = commit_shards(batch_dir, 1)
    assert manifest.shards[-1].name == "part-00002.parquet"


def test_corrupt_shard_is_detected_by_checksum_and_ignored(batch_dir: Path) -> None:
    commit_shards(batch_dir, 8)
    path = batch_dir / "shards" / "part-00000.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different bytes
    path.write_bytes(bytes(data))
    scan = scan_completed(batch_dir)
    assert scan.sample_ids == ids(4, 8)
    (ignored,) = scan.ignored
    assert ignored.listed and "sha256" in ignored.reason


def test_truncated_and_missing_shards_are_ignored(batch_dir: Path) -> None:
    commit_shards(batch_dir, 12)
    first = batch_dir / "shards" / "part-00000.parquet"
    first.write_bytes(first.read_bytes()[:-100])
    (batch_dir / "shards" / "part-00001.parquet").unlink()
    scan = scan_completed(batch_dir)
    assert scan.sample_ids == ids(8, 12)
    reasons = sorted(f.reason for f in scan.ignored)
    assert len(reasons) == 2
    assert "missing" in reasons[0] and "truncated" in reasons[1]


def test_drop_untrusted_unlists_bad_shards_and_fixes_counts(batch_dir: Path) -> None:
    manifest = commit_shards(batch_dir, 8)
    (batch_dir / "shards" / "part-00001.parquet").unlink()
    scan = scan_completed(batch_dir)
    assert drop_untrusted(manifest, scan) == ["part-00001.parquet"]
    assert [s.name for s in manifest.shards] == ["part-00000.parquet"]
    assert manifest.counts.done == 4


def test_no_manifest_means_nothing_is_trusted(tmp_path: Path) -> None:
    batch = tmp_path / "b"
    commit_shards_dir = batch / "shards"
    new_batch(batch)
    commit_shards(batch, 4)
    (batch / "manifest.json").unlink()
    scan = scan_completed(batch)
    assert scan.sample_ids == frozenset() and scan.manifest is None
    assert [f.path.parent for f in scan.ignored] == [commit_shards_dir]
    assert completed_sample_ids(tmp_path / "never-created") == set()


# -- the manifest itself ---------------------------------------------------------------


def test_manifest_round_trips_and_holds_the_batch_config(batch_dir: Path) -> None:
    manifest = commit_shards(batch_dir, 5)
    manifest.counts.failed, manifest.counts.rejected = 2, 3
    manifest.extra["state"] = "running"
    manifest.save_atomic()
    loaded = Manifest.load(batch_dir)
    assert loaded.config == CONFIG
    assert loaded.shards == manifest.shards
    assert (loaded.counts.done, loaded.counts.failed, loaded.counts.rejected) == (5, 2, 3)
    assert loaded.extra == {"state": "running"}
    raw = json.loads((batch_dir / "manifest.json").read_text())
    assert raw["config"]["prompt_sha256"] == CONFIG.prompt_sha256


def test_manifest_replace_failure_keeps_the_old_file_and_no_temp(
    batch_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (batch_dir / "manifest.json").read_bytes()
    manifest = Manifest.load(batch_dir)
    manifest.counts.failed = 99

    def no_replace(src: object, dst: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", no_replace)
    with pytest.raises(OSError, match="Input/output"):
        manifest.save_atomic()
    monkeypatch.undo()
    assert (batch_dir / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in batch_dir.iterdir()) == ["manifest.json"]


def test_unreadable_manifest_is_a_config_error_naming_it(batch_dir: Path) -> None:
    (batch_dir / "manifest.json").write_text('{"config": ')
    with pytest.raises(ConfigError, match=r"manifest\.json is unreadable"):
        Manifest.load(batch_dir)
    with pytest.raises(ConfigError, match="no manifest"):
        Manifest.load(batch_dir.parent)
    assert Manifest.load_optional(batch_dir.parent) is None


def test_config_differences_name_each_changed_field() -> None:
    changed = BatchConfig(**{**CONFIG.to_json(), "prompt_sha256": "00",
                             "sampling": {"temperature": 1.0, "max_new_tokens": 64}})
    assert CONFIG.differences(changed) == [f"prompt_sha256: \"{'ab' * 32}\" -> \"00\""]
    assert CONFIG.differences(CONFIG) == []
