"""Resume trusts only listed, checksum-valid shards; the manifest is replaced atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest
from shard_helpers import CONFIG, META, make_row, new_batch

from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.batchdir.opening import drop_untrusted, remove_temp_files
from eagle_tui.core.shards.batchdir.scan import completed_sample_ids, scan_completed
from eagle_tui.core.shards.manifest import (
    BatchConfig,
    Counts,
    IdentityExtra,
    Manifest,
    ManifestExtra,
    ShardInfo,
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
    manifest.extra.state = BatchState.RUNNING
    manifest.save_atomic()
    loaded = Manifest.load(batch_dir)
    assert loaded.config == CONFIG
    assert loaded.shards == manifest.shards
    assert (loaded.counts.done, loaded.counts.failed, loaded.counts.rejected) == (5, 2, 3)
    assert loaded.extra == ManifestExtra(state=BatchState.RUNNING)
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
    # the same sampling read back with its keys in another order and 1 for 1.0: no change
    sampling = msgspec.json.decode(
        b'{"presets": [{"top_p": 1, "temperature": 1}], "max_new_tokens": 64}',
        type=SamplingIdentity)
    changed = msgspec.structs.replace(CONFIG, prompt_sha256="00", sampling=sampling)
    assert CONFIG.differences(changed) == [f"prompt_sha256: \"{'ab' * 32}\" -> \"00\""]
    assert CONFIG.differences(CONFIG) == []
    longer = msgspec.structs.replace(CONFIG, sampling=SamplingIdentity(65, sampling.presets))
    assert [line.split(":")[0] for line in CONFIG.differences(longer)] == ["sampling"]


WRITTEN_BY_1825CD6 = Path(__file__).resolve().parents[1] / "fixtures" / "written_by_1825cd6"


def test_a_manifest_written_by_commit_1825cd6_reads_and_round_trips(tmp_path: Path) -> None:
    manifest = Manifest.load(WRITTEN_BY_1825CD6)
    presets = (SamplingPreset("a", temperature=0.6, seed=3), SamplingPreset("b", top_k=5))
    assert manifest.config == BatchConfig(
        prompt_file="/tmp/gen/work/prompts.jsonl",
        prompt_sha256="f1812c8b6f67a3202f7bc42e26c4b4efe2c3c200484a9b5109a6b2fe05fda52f",
        tokenizer_path="/models/kimi-k2.5-tiny",
        tokenizer_fingerprint="3264931ebce99928a83cce648ad28a4923d8fd7eb78825aa099b089758ef6739",
        template_hash="5c64cfa6ea13137eaf0d5393b5b1b84a9072a58e25b82a51b195695ffdf47249",
        sampling=SamplingIdentity(32, presets, {"repetition_penalty": 1.05}),
        extra=IdentityExtra(template_kwargs={"thinking": True},
                            boundary_ids={"stop": [163586, 163585], "think": 163606,
                                          "think_end": 163607,
                                          "tool_call": [163595, 163596, 163597, 163598, 163599]},
                            vocab_size=163840))
    assert [s.name for s in manifest.shards] == [f"part-0000{i}.parquet" for i in range(3)]
    assert manifest.shards[0] == ShardInfo(
        "part-00000.parquet", 5, "4f07a38fa85ba97e55c823fdbeb1c2914013b156b6827dc7f7b37ad7c061e104",
        6728, 5, "m0#a", "m2#a")
    assert manifest.counts == Counts(done=12, failed=0, flagged=12, rejected=0)
    assert manifest.extra == ManifestExtra(state=BatchState.FINISHED, servers=[
        "http://127.0.0.1:35947"], presets=["a", "b"])
    assert (manifest.created_at, manifest.version) == ("2026-11-30T14:01:22+00:00", 1)
    # written again by this code: the same document, key for key and value for value
    manifest.out_dir = tmp_path
    manifest.save_atomic()
    again = json.loads((tmp_path / "manifest.json").read_text())
    old = json.loads((WRITTEN_BY_1825CD6 / "manifest.json").read_text())
    assert again.pop("updated_at") and old.pop("updated_at")
    assert again == old


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda m: m["counts"].update(done="12"), "counts.done"),
        (lambda m: m["shards"][1].update(sha256=None), "shards[1].sha256"),
        (lambda m: m["extra"].update(state="zombie"), "extra.state"),
        (lambda m: m["config"]["sampling"].pop("max_new_tokens"), "config.sampling"),
        (lambda m: m["config"]["sampling"]["presets"][0].update(top_k="5"),
         "config.sampling.presets[0].top_k"),
    ],
)
def test_a_manifest_with_a_wrong_type_is_refused_naming_file_and_field(
    tmp_path: Path, change: object, field: str
) -> None:
    data = json.loads((WRITTEN_BY_1825CD6 / "manifest.json").read_text())
    change(data)  # type: ignore[operator]
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError) as caught:
        Manifest.load(tmp_path)
    message = str(caught.value)
    assert str(tmp_path / "manifest.json") in message and field in message
    assert "restore it or start a new batch directory" in message
