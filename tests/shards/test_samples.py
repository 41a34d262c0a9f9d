"""core.samples: a job of several batches read as one, row selection, and the decoding rules
(tokenizer choice, boundary ids) that `inspect` and the Inspect view share."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest
from shard_helpers import CONFIG, META, make_row

from eagle_tui.core import kimi
from eagle_tui.core.errors import ExportError, InspectError
from eagle_tui.core.samples.decode import (
    KIMI_BOUNDARIES,
    SharedTokenizer,
    boundaries_for,
    choose_tokenizer,
    decoding_for,
    fingerprint_warning,
)
from eagle_tui.core.samples.job import open_job
from eagle_tui.core.samples.select import (
    CLEAN,
    FLAGGED,
    Pick,
    SampleFilter,
    first_matching,
    matching_rows,
    pick_rows,
)
from eagle_tui.core.shards.manifest import IdentityExtra, Manifest
from eagle_tui.core.shards.schema import FooterTokenizer, ShardMetadata
from eagle_tui.core.shards.writer import ShardWriter
from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer

FLAG_EVERY = 3  # rows 0, 3, 6, … carry a flag


def write_batch(directory: Path, first: int, count: int, *, partition: str | None = None,
                meta: ShardMetadata = META, per_shard: int = 4) -> Path:
    manifest = Manifest(directory, CONFIG)
    manifest.extra.partition = partition
    manifest.save_atomic()
    with ShardWriter(directory, metadata=meta, manifest=manifest, max_rows=per_shard) as w:
        for i in range(first, first + count):
            w.add(make_row(i, flags=("truncated",) if i % FLAG_EVERY == 0 else ()))
    return directory


@pytest.fixture
def slices(tmp_path: Path) -> list[Path]:
    """Slices 0/3 (rows 0-9), 1/3 (none yet) and 2/3 (rows 10-16) of one job."""
    return [write_batch(tmp_path / "a", 0, 10, partition="0/3"),
            write_batch(tmp_path / "empty", 0, 0, partition="1/3"),
            write_batch(tmp_path / "b", 10, 7, partition="2/3")]


@pytest.fixture(scope="module")
def bundled() -> SharedTokenizer:
    return SharedTokenizer(load_tokenizer(bundled_tokenizer_path()))


# -- a job -------------------------------------------------------------------------------


def test_slices_read_as_one_job(slices: list[Path]) -> None:
    job = open_job(slices)
    assert job.num_rows == 17 and job.slices == "slices 0, 1, 2 of 3 (all)"
    assert [job.row(i).sample_id for i in (0, 9, 10, 16, -1)] == [
        "s000000", "s000009", "s000010", "s000016", "s000016"]
    assert job.index_of("s000012") == 12 and job.index_of("nope") is None
    shard, position = job.shard_of(11)
    assert shard.path.parent == slices[2] / "shards" and position == 1
    with pytest.raises(IndexError):
        job.row(17)


def test_one_path_is_read_as_it_is(slices: list[Path]) -> None:
    job = open_job([slices[0] / "shards"])  # a shards directory: no manifest, no checks
    assert job.num_rows == 10 and job.slices == "" and job.manifest is None


def test_directories_that_are_not_one_job_are_refused(slices: list[Path], tmp_path: Path) -> None:
    whole = write_batch(tmp_path / "whole", 50, 2)
    with pytest.raises(ExportError, match="whole batch"):
        open_job([slices[0], whole])


# -- which rows --------------------------------------------------------------------------


def test_filters_run_through_every_batch(slices: list[Path]) -> None:
    job = open_job(slices)
    flagged = [i for i in range(17) if i % FLAG_EVERY == 0]
    assert matching_rows(job, SampleFilter(flag="truncated")).to_pylist() == flagged
    assert matching_rows(job, SampleFilter(flag=FLAGGED)).to_pylist() == flagged
    assert len(matching_rows(job, SampleFilter(flag=CLEAN))) == 17 - len(flagged)
    finish = [i for i in range(17) if i % 5 == 4]
    assert matching_rows(job, SampleFilter(finish="length")).to_pylist() == finish
    assert first_matching(job, SampleFilter(flag=CLEAN)) == 1
    assert first_matching(job, SampleFilter(flag="aborted")) is None


def test_inspect_picks_what_the_view_lists(slices: list[Path]) -> None:
    job = open_job(slices)
    listed = matching_rows(job, SampleFilter(flag="truncated")).to_pylist()
    assert pick_rows(job, Pick(flag="truncated"), "here") == listed[:1]
    assert pick_rows(job, Pick(sample_id="s000015"), "here") == [15]
    assert pick_rows(job, Pick(index=-2), "here") == [15]
    assert pick_rows(job, Pick(), "here") == [0]
    with pytest.raises(InspectError, match="out of range") as out_of_range:
        pick_rows(job, Pick(index=17), "here")
    assert out_of_range.value.status == 2
    with pytest.raises(InspectError, match="known flags") as unknown:
        pick_rows(job, Pick(flag="made_up"), "here")
    assert unknown.value.status == 1
    with pytest.raises(InspectError, match="single-turn"):
        pick_rows(job, Pick(conversation="c0"), "here")


# -- which tokenizer ---------------------------------------------------------------------


def manifest_with(directory: Path, tokenizer_path: str) -> Manifest:
    return Manifest(directory, msgspec.structs.replace(CONFIG, tokenizer_path=tokenizer_path))


def footer_with(path: str, name: str = "tok", fingerprint: str = META.tokenizer.fingerprint,
                **boundary: object) -> ShardMetadata:
    tokenizer = FooterTokenizer(name=name, path=path, fingerprint=fingerprint,
                                vocab_size=META.tokenizer.vocab_size)
    return ShardMetadata(tokenizer=tokenizer, template_hash=META.template_hash,
                         sampling=META.sampling, boundary_ids=boundary or META.boundary_ids)


def test_the_tokenizer_rule(tmp_path: Path) -> None:
    old, new, named = tmp_path / "old", tmp_path / "new", tmp_path / "named"
    for directory in (old, new, named):
        directory.mkdir()
    gone = str(tmp_path / "gone")
    moved = manifest_with(tmp_path, str(new))
    assert choose_tokenizer(named, moved, footer_with(str(old))).path == named
    assert choose_tokenizer(None, moved, footer_with(str(old))) == (
        choose_tokenizer(None, moved, None))
    assert choose_tokenizer(None, moved, footer_with(str(old))).path == new
    assert choose_tokenizer(None, manifest_with(tmp_path, gone), footer_with(str(old))).path == old
    assert choose_tokenizer(None, None, footer_with(str(old))).source == "footer"
    bundled = choose_tokenizer(None, manifest_with(tmp_path, gone),
                               footer_with(gone, name="kimi-k2.5-tiny"))
    assert bundled.path == bundled_tokenizer_path() and bundled.source == "bundled"
    lost = choose_tokenizer(None, manifest_with(tmp_path, gone), footer_with(gone))
    assert lost.path is None and gone in lost.why and "not on this machine" in lost.why
    assert "name no tokenizer" in choose_tokenizer(None, None, None).why


def test_a_tokenizer_other_than_the_recorded_one_is_named(bundled: SharedTokenizer,
                                                          tmp_path: Path) -> None:
    ours = bundled.fingerprint()
    assert fingerprint_warning(bundled, None, footer_with("/x", fingerprint=ours)) == ""
    assert fingerprint_warning(bundled, None, None) == ""
    warning = fingerprint_warning(bundled, manifest_with(tmp_path, "/x"), None)
    assert "differs from the one the shards were captured with" in warning


# -- which boundary ids ------------------------------------------------------------------


def test_recorded_ids_win_key_by_key(bundled: SharedTokenizer, tmp_path: Path) -> None:
    footer = footer_with("/x", think=7, think_end=8, stop=[9], tool_call=[])
    assert boundaries_for(footer, None, bundled) == boundaries_for(footer, None, None)
    ids = boundaries_for(footer, None, None)
    assert (ids.think, ids.think_end, ids.stop, ids.tool_call) == (7, 8, (9,), frozenset())

    partial = footer_with("/x", think_end=8, stop=[9, 10])
    manifest = Manifest(tmp_path, msgspec.structs.replace(
        CONFIG, extra=IdentityExtra(boundary_ids={"think": 6, "stop": [1]})))
    ids = boundaries_for(partial, manifest, None)
    assert (ids.think, ids.think_end, ids.stop) == (6, 8, (9, 10))  # footer beats manifest
    assert ids.tool_call == KIMI_BOUNDARIES.tool_call  # no record, no tokenizer: Kimi's


def test_what_no_record_says_comes_from_the_tokenizer_then_kimi(bundled: SharedTokenizer) -> None:
    footer = footer_with("/x", think_end=8, stop="not ids", tool_call=None)
    with_tokenizer = boundaries_for(footer, None, bundled)
    own = bundled.boundary_ids()
    assert with_tokenizer.think == own.think and with_tokenizer.stop == own.stop
    assert with_tokenizer.tool_call == own.tool_call and with_tokenizer.think_end == 8
    raw = boundaries_for(footer, None, None)
    assert raw.think == kimi.THINK and raw.stop == (kimi.IM_END,)
    assert boundaries_for(footer_with("/x", think=None), None, bundled).think is None


def test_each_row_is_split_by_its_own_shards_record(tmp_path: Path) -> None:
    """A batch resumed with --force past a boundary change: each shard keeps its own ids."""
    directory = write_batch(tmp_path / "forced", 0, 4)
    changed = footer_with("/x", think=1, think_end=2, stop=[3], tool_call=[4])
    manifest = Manifest.load(directory)
    with ShardWriter(directory, metadata=changed, manifest=manifest, max_rows=4) as writer:
        writer.add(make_row(4))
    job = open_job([directory])
    first, last = (decoding_for(job.footer_of(i), job.manifest, None) for i in (0, 4))
    assert first.boundaries.think == kimi.THINK and last.boundaries.think == 1
    row = job.row(4)
    assert [s.kind for s in last.segments(row)] == [s.kind for s in (
        decoding_for(changed, None, None).segments(row))]


def test_a_copied_batch_finds_its_tokenizer_by_name(tmp_path: Path) -> None:
    """Shards copied to a machine without the recorded tokenizer directory decode with the
    bundled tokenizer when they name it."""
    directory = write_batch(tmp_path / "batch", 0, 2)
    copy = tmp_path / "elsewhere"
    shutil.copytree(directory, copy)
    job = open_job([copy])
    choice = choose_tokenizer(None, job.manifest, job.metadata)
    assert META.tokenizer.name == "kimi-k2.5-tiny" and choice.source == "bundled"
