"""The capture engine against in-process fake servers: the happy path, presets, resume,
rejects, events, and the files it leaves behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_engine_fakes import (
    FakeSGLang,
    bundled_tokenizer,
    capture,
    expected_output,
    make_config,
    rows_of,
    write_prompts,
)

from eagle_tui.core import kimi
from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.events import CaptureEvent
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.tokenizer import LoadedTokenizer


@pytest.fixture
def tokenizer() -> LoadedTokenizer:
    return bundled_tokenizer()


def prompts_by_id(path: Path) -> dict[str, list[dict[str, Any]]]:
    found = {}
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        found[record["id"]] = record["messages"]
    return found


@pytest.fixture
def fake() -> Iterator[FakeSGLang]:
    yield FakeSGLang()


async def test_every_prompt_once_with_exact_ids(tmp_path: Path, fake: FakeSGLang,
                                                tokenizer: LoadedTokenizer) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", 40, bad_every=10, tools_every=3)
    config = make_config(tmp_path, [fake.url])
    summary = await capture(config, [fake], tokenizer)

    rows = rows_of(config.out_dir)
    good = prompts_by_id(prompts)
    assert sorted(r["sample_id"] for r in rows) == sorted(good)
    for row in rows:
        prompt = tokenizer.render(good[row["sample_id"]],
                                  tools=None if int(row["sample_id"][1:]) % 3 else
                                  [{"type": "function", "function": {
                                      "name": "lookup",
                                      "parameters": {"type": "object", "properties": {}}}}])
        assert row["input_ids"][: row["prompt_len"]] == prompt
        assert row["input_ids"][row["prompt_len"]:] == expected_output(prompt)
        assert row["prompt_len"] == len(prompt) and prompt[-1] == kimi.THINK
        assert row["finish_reason"] == "stop" and row["matched_stop"] == kimi.IM_END
        assert row["think_end"] == len(prompt) + 3 and row["flags"] == []
        assert row["endpoint"] == fake.url and row["rid"].startswith("cap-")
    rejects = [json.loads(x) for x in (config.out_dir / "rejects.jsonl").read_text().splitlines()]
    assert sorted(r["line"] for r in rejects) == [10, 20, 30, 40]
    assert summary.state == "finished" and summary.exit_code == 1
    assert summary.progress.counts.done == 36 and summary.progress.counts.rejected == 4
    assert summary.progress.counts.written == 36 and summary.progress.counts.total == 40
    manifest = Manifest.load(config.out_dir)
    assert manifest.counts.done == 36 and manifest.counts.rejected == 4
    assert manifest.extra.state == "finished"


async def test_request_shape(tmp_path: Path, fake: FakeSGLang,
                             tokenizer: LoadedTokenizer) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 3)
    config = make_config(tmp_path, [fake.url], max_new_tokens=77,
                         presets=(SamplingPreset(temperature=0.6, top_p=0.95, seed=7),))
    await capture(config, [fake], tokenizer)
    rids = [b["rid"] for b in fake.generate_bodies]
    assert len({len(r) for r in rids}) == 1 and len(set(rids)) == 3
    for body in fake.generate_bodies:
        assert body["stream"] is False
        sampling = body["sampling_params"]
        assert sampling["max_new_tokens"] == 77 and sampling["temperature"] == 0.6
        assert sampling["stop_token_ids"] == [kimi.IM_END, kimi.EOS]
        assert sampling["skip_special_tokens"] is False and sampling["no_stop_trim"] is True
        assert sampling["sampling_seed"] == 7


async def test_presets_give_one_row_each(tmp_path: Path, fake: FakeSGLang,
                                         tokenizer: LoadedTokenizer) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 5)
    presets = (SamplingPreset("t0.6", temperature=0.6), SamplingPreset("t1", temperature=1.0))
    config = make_config(tmp_path, [fake.url], presets=presets)
    summary = await capture(config, [fake], tokenizer)
    ids = sorted(r["sample_id"] for r in rows_of(config.out_dir))
    assert ids == sorted(f"p{i:05d}#{p}" for i in range(5) for p in ("t0.6", "t1"))
    temps = sorted(b["sampling_params"]["temperature"] for b in fake.generate_bodies)
    assert temps == [0.6] * 5 + [1.0] * 5
    assert summary.exit_code == 0


async def test_resume_skips_done_and_refuses_changed_config(
    tmp_path: Path, fake: FakeSGLang, tokenizer: LoadedTokenizer
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 12)
    fake.fault_for = lambda prompt: "ctx" if len(fake.generate_bodies) % 4 == 0 else None
    config = make_config(tmp_path, [fake.url], concurrency=1)
    first = await capture(config, [fake], tokenizer)
    assert first.progress.counts.failed == 3 and first.exit_code == 1
    failures = (config.out_dir / "failures.jsonl").read_text().splitlines()
    assert {json.loads(x)["kind"] for x in failures} == {"context_too_long"}

    with pytest.raises(ConfigError, match="--resume"):
        await capture(config, [fake], tokenizer)
    changed = make_config(tmp_path, [fake.url], resume=True, max_new_tokens=65)
    with pytest.raises(ConfigError, match="different config"):
        await capture(changed, [fake], tokenizer)

    fake.fault_for = lambda prompt: None
    sent_before = len(fake.generate_bodies)
    # Issue 12: a plain resume does not resend prompts too long for the context; they stay
    # failed (and listed), --retry-failed resends them.
    kept = await capture(make_config(tmp_path, [fake.url], resume=True), [fake], tokenizer)
    assert len(fake.generate_bodies) == sent_before
    assert kept.progress.counts.already_done == 9 and kept.progress.counts.failed == 3
    assert kept.exit_code == 1
    failures_again = (config.out_dir / "failures.jsonl").read_text().splitlines()
    assert sorted(failures_again) == sorted(failures)
    second = await capture(make_config(tmp_path, [fake.url], resume=True, retry_failed=True),
                           [fake], tokenizer)
    assert len(fake.generate_bodies) - sent_before == 3
    assert second.progress.counts.already_done == 9 and second.progress.counts.done == 3
    assert second.exit_code == 0
    assert sorted(r["sample_id"] for r in rows_of(config.out_dir)) == [
        f"p{i:05d}" for i in range(12)]
    assert (config.out_dir / "failures.previous.jsonl").exists()
    assert (config.out_dir / "failures.jsonl").read_text() == ""


async def test_out_of_vocab_prompt_is_rejected_not_sent(
    tmp_path: Path, fake: FakeSGLang, tokenizer: LoadedTokenizer
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 4)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    # A vocabulary smaller than the template's special ids: every prompt is out of range.
    (model_dir / "config.json").write_text(json.dumps({"vocab_size": 163000}))
    config = make_config(tmp_path, [fake.url], model_dir=model_dir)
    summary = await capture(config, [fake], tokenizer)
    assert fake.generate_bodies == []
    rejects = [json.loads(x) for x in (config.out_dir / "rejects.jsonl").read_text().splitlines()]
    assert [r["sample_id"] for r in rejects] == [f"p{i:05d}" for i in range(4)]
    assert "outside the model's vocabulary (size 163000)" in rejects[0]["reason"]
    assert summary.progress.counts.rejected == 4 and summary.exit_code == 1


async def test_events_and_watched_stream(tmp_path: Path, fake: FakeSGLang,
                                         tokenizer: LoadedTokenizer) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 6, bad_every=6)
    events: list[CaptureEvent] = []
    config = make_config(tmp_path, [fake.url], concurrency=1)
    by_url = {fake.url: fake}
    engine = CaptureEngine(config, tokenizer=tokenizer, event_sink=events.append,
                           client_factory=lambda url: by_url[url.public].client())
    engine.watch(2)
    await engine.run()
    kinds = [e.kind for e in events]
    assert kinds.count("sent") == 5 and kinds.count("finished") == 5
    assert kinds.count("rejected") == 1
    streamed = [b for b in fake.generate_bodies if b["stream"]]
    assert len(streamed) == 2
    deltas = [e for e in events if e.kind == "delta"]
    watched = {e.sample_id for e in events if e.kind == "sent" and e.watched}
    assert {e.sample_id for e in deltas} == watched and len(watched) == 2
    for sample_id in watched:
        ids = [i for e in deltas if e.sample_id == sample_id for i in e.new_ids]
        row = next(r for r in rows_of(config.out_dir) if r["sample_id"] == sample_id)
        assert ids == row["input_ids"][row["prompt_len"]:]


async def test_api_key_sent_but_never_written(tmp_path: Path, fake: FakeSGLang,
                                              tokenizer: LoadedTokenizer) -> None:
    secret = "sk-very-secret-key-123"
    write_prompts(tmp_path / "prompts.jsonl", 8, bad_every=4)
    fake.fault_for = lambda prompt: "ctx" if sum(prompt) % 3 == 0 else None
    config = make_config(tmp_path, [fake.url], api_key=secret)
    by_url = {fake.url: fake}
    engine = CaptureEngine(config, tokenizer=tokenizer,
                           client_factory=lambda url: by_url[url.public].client(api_key=secret))
    await engine.run()
    assert f"Bearer {secret}" in fake.auth_headers
    assert secret not in repr(config)
    for path in config.out_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
