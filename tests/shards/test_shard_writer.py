"""ShardWriter: exact schema, round trip through plain pyarrow, atomic commit, rolling, ENOSPC."""

from __future__ import annotations

import errno
import hashlib
import random
from array import array
from dataclasses import replace
from datetime import timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from shard_helpers import META, T0, make_row

from eagle_tui.core import fsio
from eagle_tui.core.errors import ShardWriteError
from eagle_tui.core.shards import manifest as manifest_module
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.schema import SHARD_SCHEMA, ShardMetadata, ShardRow, rows_to_table
from eagle_tui.core.shards.writer import ShardWriter


def shard_files(batch: Path) -> list[str]:
    return sorted(p.name for p in (batch / "shards").iterdir())


def write_rows(batch: Path, rows: list[ShardRow], **limits: int) -> Manifest:
    manifest = Manifest.load(batch)
    with ShardWriter(batch, metadata=META, manifest=manifest, **limits) as writer:
        for row in rows:
            writer.add(row)
    return manifest


def test_round_trip_through_plain_pyarrow(batch_dir: Path) -> None:
    rows = [make_row(i, flags=["tool_call"] if i % 4 == 0 else []) for i in range(30)]
    write_rows(batch_dir, rows, max_rows=12, row_group_rows=5)
    table = pq.read_table(sorted((batch_dir / "shards").glob("*.parquet")))
    back = [ShardRow.from_dict(d) for d in table.to_pylist()]
    assert [r.sample_id for r in back] == [r.sample_id for r in rows]
    for got, want in zip(back, rows, strict=True):
        assert got.input_ids == list(want.input_ids)
        assert (got.prompt_len, got.finish_reason, got.matched_stop, got.think_end) == (
            want.prompt_len, want.finish_reason, want.matched_stop, want.think_end)
        assert (got.flags, got.endpoint, got.rid) == (list(want.flags), want.endpoint, want.rid)
        assert got.latency_s == pytest.approx(want.latency_s)
        assert got.created_at == want.created_at
    assert back[0].created_at == T0  # microseconds and UTC survive


def test_schema_and_metadata_are_exact(batch_dir: Path) -> None:
    write_rows(batch_dir, [make_row(0)])
    path = batch_dir / "shards" / "part-00000.parquet"
    schema = pq.read_schema(path)
    assert schema.remove_metadata().equals(SHARD_SCHEMA)
    assert ShardMetadata.from_parquet(schema.metadata) == META
    assert pq.ParquetFile(path).metadata.row_group(0).column(1).compression == "ZSTD"


def test_shard_is_a_temp_file_until_committed_then_listed_with_its_checksum(
    batch_dir: Path,
) -> None:
    manifest = Manifest.load(batch_dir)
    writer = ShardWriter(batch_dir, metadata=META, manifest=manifest, row_group_rows=2)
    for i in range(5):
        writer.add(make_row(i))
    assert shard_files(batch_dir) == ["part-00000.parquet.tmp"]
    assert writer.pending_rows == 5
    assert Manifest.load(batch_dir).shards == []
    info = writer.flush()
    assert info is not None and info.rows == 5
    assert shard_files(batch_dir) == ["part-00000.parquet"]
    path = batch_dir / "shards" / info.name
    assert info.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert info.bytes == path.stat().st_size
    assert (info.first_sample_id, info.last_sample_id) == ("s000000", "s000004")
    on_disk = Manifest.load(batch_dir)
    assert on_disk.shards == [info] and on_disk.counts.done == 5
    assert writer.flush() is None  # nothing pending
    writer.close()


def test_rolls_by_rows_and_counts_flagged(batch_dir: Path) -> None:
    rows = [make_row(i, flags=["truncated"] if i < 3 else []) for i in range(25)]
    manifest = write_rows(batch_dir, rows, max_rows=10, row_group_rows=4)
    assert [s.rows for s in manifest.shards] == [10, 10, 5]
    assert [s.flagged for s in manifest.shards] == [3, 0, 0]
    assert (manifest.counts.done, manifest.counts.flagged) == (25, 3)
    groups = pq.ParquetFile(batch_dir / "shards" / "part-00000.parquet").metadata
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [4, 4, 2]


def test_rolls_by_bytes(batch_dir: Path) -> None:
    rng = random.Random(7)
    rows = [make_row(i) for i in range(40)]
    rows = [ShardRow(**{**{f: getattr(r, f) for f in r.__dataclass_fields__},
                        "input_ids": [rng.randrange(163840) for _ in range(2000)]})
            for r in rows]
    manifest = write_rows(batch_dir, rows, max_bytes=30_000, row_group_bytes=10_000)
    assert len(manifest.shards) > 2
    assert sum(s.rows for s in manifest.shards) == 40
    for shard in manifest.shards:  # a shard passes max_bytes by at most its last row group
        meta = pq.ParquetFile(batch_dir / "shards" / shard.name).metadata
        last = meta.row_group(meta.num_row_groups - 1)
        last_bytes = sum(last.column(c).total_compressed_size for c in range(last.num_columns))
        assert shard.bytes - last_bytes < 30_000 <= shard.bytes or shard is manifest.shards[-1]


def test_new_shards_never_reuse_a_name_on_disk(batch_dir: Path) -> None:
    (batch_dir / "shards").mkdir()
    (batch_dir / "shards" / "part-00007.parquet.tmp").write_bytes(b"left by a crash")
    manifest = write_rows(batch_dir, [make_row(0)])
    assert manifest.shards[0].name == "part-00008.parquet"
    assert (batch_dir / "shards" / "part-00007.parquet.tmp").read_bytes() == b"left by a crash"


def failing_writes(after: int) -> object:
    """A HashingFile.write whose calls after the first ``after`` fail with ENOSPC."""
    real = fsio.HashingFile.write
    calls = 0

    def write(sink: fsio.HashingFile, data: bytes) -> int:
        nonlocal calls
        calls += 1
        if calls > after:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(sink, data)

    return write


@pytest.mark.parametrize("after", [0, 1, 3])
def test_disk_full_leaves_no_partial_shard_and_no_manifest_entry(
    batch_dir: Path, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    write_rows(batch_dir, [make_row(100)])
    before = (batch_dir / "manifest.json").read_text()
    manifest = Manifest.load(batch_dir)
    writer = ShardWriter(batch_dir, metadata=META, manifest=manifest, row_group_rows=2)
    monkeypatch.setattr(fsio.HashingFile, "write", failing_writes(after))
    with pytest.raises(ShardWriteError, match=r"disk full \(ENOSPC\).*resume") as caught:
        for i in range(6):
            writer.add(make_row(i))
        writer.flush()
    assert caught.value.lost_sample_ids  # the caller learns exactly what was not saved
    assert set(caught.value.lost_sample_ids) <= {f"s{i:06d}" for i in range(6)}
    assert shard_files(batch_dir) == ["part-00000.parquet"]
    assert (batch_dir / "manifest.json").read_text() == before
    assert [s.name for s in manifest.shards] == ["part-00000.parquet"]


def test_writer_goes_on_after_a_failed_shard(
    batch_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = Manifest.load(batch_dir)
    writer = ShardWriter(batch_dir, metadata=META, manifest=manifest, row_group_rows=1)
    real = fsio.HashingFile.write
    monkeypatch.setattr(fsio.HashingFile, "write", failing_writes(0))
    with pytest.raises(ShardWriteError):
        writer.add(make_row(0))
    monkeypatch.setattr(fsio.HashingFile, "write", real)
    writer.add(make_row(1))
    info = writer.close()
    assert info is not None and info.first_sample_id == "s000001"
    assert shard_files(batch_dir) == [info.name]


def test_manifest_failure_removes_the_renamed_shard(
    batch_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = Manifest.load(batch_dir)
    writer = ShardWriter(batch_dir, metadata=META, manifest=manifest)
    writer.add(make_row(0))

    def no_space(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(manifest_module, "write_atomic", no_space)
    with pytest.raises(ShardWriteError, match="list in the manifest") as caught:
        writer.flush()
    assert caught.value.lost_sample_ids == ("s000000",)
    assert shard_files(batch_dir) == []
    assert manifest.shards == [] and manifest.counts.done == 0


def test_leaving_the_context_on_an_error_drops_pending_rows(batch_dir: Path) -> None:
    manifest = Manifest.load(batch_dir)
    with pytest.raises(RuntimeError, match="boom"), ShardWriter(
        batch_dir, metadata=META, manifest=manifest, row_group_rows=1
    ) as writer:
        writer.add(make_row(0))
        raise RuntimeError("boom")
    assert shard_files(batch_dir) == []
    assert manifest.shards == []


def test_add_after_close_is_refused(batch_dir: Path) -> None:
    writer = ShardWriter(batch_dir, metadata=META)
    assert writer.close() is None
    with pytest.raises(RuntimeError, match="after close"):
        writer.add(make_row(0))


def test_rows_to_table_equals_converting_python_lists() -> None:
    # Capture rows hold array('i'); other callers pass lists or tuples, some rows are empty.
    shapes = [lambda ids: array("i", ids), list, tuple, lambda ids: array("i")]
    times = [T0, T0.replace(tzinfo=None), T0.astimezone(timezone(timedelta(hours=-7)))]
    rows = [replace(make_row(i, flags=["tool_call", "truncated"][: i % 3]),
                    input_ids=shapes[i % 4](make_row(i).input_ids), created_at=times[i % 3],
                    sample_id=f"s{i}-é你好", latency_s=0.1 * i)
            for i in range(11)]
    reference = {name: [getattr(r, name) for r in rows] for name in SHARD_SCHEMA.names}
    reference["input_ids"] = [list(r.input_ids) for r in rows]
    reference["flags"] = [list(r.flags) for r in rows]
    table = rows_to_table(rows)
    table.validate(full=True)
    assert table.equals(pa.Table.from_pydict(reference, schema=SHARD_SCHEMA))
    assert rows_to_table([]).num_rows == 0


def test_an_id_outside_int32_fails_the_row_group(batch_dir: Path) -> None:
    bad = replace(make_row(1), input_ids=[1, 2**31])
    with pytest.raises(ShardWriteError) as caught:
        write_rows(batch_dir, [make_row(0), bad], row_group_rows=2)
    assert list(caught.value.lost_sample_ids) == ["s000000", "s000001"]
