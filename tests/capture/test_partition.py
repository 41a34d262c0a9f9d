"""``capture --shard I/N``: N batches over one prompt file split it with no overlap and no gap,
and ``export``/``stats``/``inspect`` take the N directories as one job."""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from support.crashresume import assert_only_valid_shards
from test_engine_fakes import bundled_tokenizer, make_config, write_prompts

from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.partition import Partition
from eagle_tui.core.errors import ConfigError, ExportError
from eagle_tui.core.export.options import ExportOptions
from eagle_tui.core.export.run import export
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.tui.cli import inspect as inspect_verb
from eagle_tui.tui.cli import stats as stats_verb
from eagle_tui.tui.cli.main import main

pytestmark = pytest.mark.slow

COUNT = 120
GREEDY = (SamplingPreset(temperature=0.0),)


def test_partition_is_deterministic_and_covers_every_id() -> None:
    ids = [f"p{i:05d}" for i in range(1000)]
    parts = [Partition(i, 4) for i in range(4)]
    owners = [[p for p in parts if p.owns(sid)] for sid in ids]
    assert all(len(o) == 1 for o in owners)
    sizes = Counter(str(o[0]) for o in owners)
    assert all(200 < n < 300 for n in sizes.values()), sizes  # spread, not lumped
    assert Partition.parse(" 3/4 ") == Partition(3, 4)
    for bad in ("4/4", "-1/4", "1/0", "a/b", "1"):
        with pytest.raises(ConfigError):
            Partition.parse(bad)


async def capture_slice(tmp_path: Path, url: str, name: str, partition: Partition | None) -> (
    Path
):
    config = make_config(tmp_path, [url], out_dir=tmp_path / name, partition=partition,
                         presets=GREEDY, max_new_tokens=24, concurrency=8)
    summary = await CaptureEngine(config, tokenizer=bundled_tokenizer()).run()
    assert summary.state == "finished" and summary.progress.counts.failed == 0
    return config.out_dir


async def test_four_slices_split_one_job_and_export_like_one_batch(tmp_path: Path,
                                                                   sim_server: SimProcess) -> None:
    write_prompts(tmp_path / "prompts.jsonl", COUNT, bad_every=17)
    whole = await capture_slice(tmp_path, sim_server.url, "whole", None)
    slices = [await capture_slice(tmp_path, sim_server.url, f"slice{i}", Partition(i, 4))
              for i in range(4)]
    stored = [assert_only_valid_shards(d) for d in slices]
    union = sum(stored, Counter())
    assert union == assert_only_valid_shards(whole), "union of the slices == the prompt set"
    assert set(union.values()) == {1} and all(stored), "no overlap, and no slice empty"
    rejects = [len((d / "rejects.jsonl").read_text().splitlines()) for d in slices]
    assert sum(rejects) == len((whole / "rejects.jsonl").read_text().splitlines()) > 0
    assert [Manifest.load(d).extra.partition for d in slices] == ["0/4", "1/4", "2/4", "3/4"]

    options = ExportOptions(format="speculators")
    one = export([whole], tmp_path / "one.jsonl", options)
    four = export(slices, tmp_path / "four.jsonl", options)
    assert one.counts.kept == four.counts.kept == COUNT - COUNT // 17
    assert sorted(_lines(tmp_path / "one.jsonl")) == sorted(_lines(tmp_path / "four.jsonl"))

    with pytest.raises(ExportError, match="slice"):
        export([slices[0], whole], tmp_path / "mixed.jsonl", options)
    copy = shutil.copytree(slices[0], tmp_path / "copy")
    with pytest.raises(ExportError, match="given twice"):
        export([slices[0], copy], tmp_path / "twice.jsonl", options)


RUN_FIELDS = ("rid", "created_at", "latency_s")  # which request, when: not the sample


def _lines(path: Path) -> list[str]:
    rows = []
    with path.open() as handle:
        for line in handle:
            row = json.loads(line)
            for key in RUN_FIELDS:
                row["metadata"].pop(key, None)
            rows.append(json.dumps(row, sort_keys=True))
    return rows


async def test_stats_and_inspect_take_the_slices_as_one(tmp_path: Path, sim_server: SimProcess,
                                                         capsys: pytest.CaptureFixture[str]) -> (
    None
):
    write_prompts(tmp_path / "prompts.jsonl", 40)
    slices = [await capture_slice(tmp_path, sim_server.url, f"s{i}", Partition(i, 2))
              for i in range(2)]
    parser = argparse.ArgumentParser()
    stats_verb.add_arguments(parser)
    assert stats_verb.run(parser.parse_args([*map(str, slices), "--json"])) == 0
    document = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert document["rows"] == 40 and document["job"] == "slices 0, 1 of 2 (all)"
    assert document["manifest_counts"]["done"] == 40

    parser = argparse.ArgumentParser()
    inspect_verb.add_arguments(parser)
    second = Manifest.load(slices[1]).shards[0].first_sample_id
    code = inspect_verb.run(parser.parse_args([*map(str, slices), "--id", second, "--raw-ids"]))
    assert code == 0 and second in capsys.readouterr().out

    other = tmp_path / "prompts2.jsonl"
    write_prompts(other, 41)
    config = make_config(tmp_path, [sim_server.url], prompts=other, out_dir=tmp_path / "odd",
                         partition=Partition(0, 2), presets=GREEDY, max_new_tokens=24)
    await CaptureEngine(config, tokenizer=bundled_tokenizer()).run()
    parser = argparse.ArgumentParser()
    stats_verb.add_arguments(parser)
    assert stats_verb.run(parser.parse_args([str(slices[1]), str(config.out_dir)])) == 2
    assert "not slices of one job" in capsys.readouterr().err


async def test_resume_refuses_another_slice(tmp_path: Path, sim_server: SimProcess) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 10)
    out = await capture_slice(tmp_path, sim_server.url, "s", Partition(1, 3))
    config = make_config(tmp_path, [sim_server.url], out_dir=out, partition=Partition(2, 3),
                         presets=GREEDY, max_new_tokens=24, resume=True)
    with pytest.raises(ConfigError, match="--shard 1/3"):
        await CaptureEngine(config, tokenizer=bundled_tokenizer()).run()


def test_a_detached_batch_keeps_its_slice(tmp_path: Path) -> None:
    from eagle_tui.core.capture.config import config_from_json, config_to_json

    config = make_config(tmp_path, ["http://127.0.0.1:30000"], partition=Partition(2, 5))
    assert b'"partition":"2/5"' in config_to_json(config)
    assert config_from_json(config_to_json(config)).partition == Partition(2, 5)
    whole = make_config(tmp_path, ["http://127.0.0.1:30000"])
    assert b"partition" not in config_to_json(whole)
    assert config_from_json(config_to_json(whole)).partition is msgspec.UNSET


async def test_one_slice_alone_says_the_job_is_incomplete_and_export_refuses_it(
        tmp_path: Path, sim_server: SimProcess, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 20 item 6: `export runs/sh0` said "kept 97 of 97" and `stats` nothing."""
    write_prompts(tmp_path / "prompts.jsonl", 30)
    first = await capture_slice(tmp_path, sim_server.url, "sh0", Partition(0, 3))
    second = await capture_slice(tmp_path, sim_server.url, "sh2", Partition(2, 3))

    parser = argparse.ArgumentParser()
    stats_verb.add_arguments(parser)
    assert stats_verb.run(parser.parse_args([str(first)])) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "one job: slices 0 of 3 (missing 1/3, 2/3)" in printed
    assert "incomplete job: slices 1/3, 2/3 missing" in printed
    assert stats_verb.run(parser.parse_args([str(first), str(second), "--json"])) == 0
    document = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert document["missing_slices"] == ["1/3"]

    out = tmp_path / "part.jsonl"
    refused = r"incomplete job: .*sh0, .*sh2 are only slices 0/3, 2/3; slice 1/3 is missing"
    with pytest.raises(ExportError, match=refused):
        export([first, second], out, ExportOptions("speculators"))
    assert main(["export", str(first), "--format", "speculators", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "slices 1/3, 2/3 are missing" in err
    assert "--allow-partial" in err and not out.exists()

    assert main(["export", str(first), str(second), "--format", "speculators", "--out",
                 str(out), "--allow-partial"]) == 0
    printed = capsys.readouterr().out
    assert "warning: incomplete job:" in printed and "slice 1/3 is missing" in printed
    rows = len(out.read_text().splitlines())
    assert rows == sum(Manifest.load(d).counts.done for d in (first, second))
