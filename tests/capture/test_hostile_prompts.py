"""Hostile prompt files (issue 12): no line stops a batch, every good line is stored once,
every bad one is in rejects.jsonl with its line, and broken files keep what can be read.

The fuzz test uses a seeded generator (reproducible, no extra dependency): thousands of
lines mixing good records with every class of bad one found by the adversarial tester.
The engine runs in process against ``FakeSGLang`` (the real client, no sockets), so the
whole read -> normalize -> render -> send -> store path runs on each line.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_engine_fakes import FakeSGLang, bundled_tokenizer, capture, make_config, rows_of

from eagle_tui.core.capture.prompts import PromptRecord, Reject, open_prompts
from eagle_tui.core.capture.records import MAX_DEPTH
from eagle_tui.core.sample_ids import MAX_ID_CHARS

FUZZ_LINES = 3000


def good_line(i: int, rng: random.Random) -> str:
    """A usable record with a unique id (some with non-ASCII, emoji, tools)."""
    text = rng.choice(["why is the sky blue", "ça va ? 東京 🚀", "tab\there", "a\u00a0b"])
    record: dict[str, Any] = {"id": f"good-{i:05d}",
                              "messages": [{"role": "user", "content": f"{text} {i}"}]}
    if i % 7 == 0:
        record["tools"] = [{"type": "function", "function": {
            "name": "f", "parameters": {"type": "object", "properties": {
                "a": {"type": "object", "properties": {"b": {"type": "string"}}}}}}}]
    if i % 11 == 0:
        record = {"id": i * 1000 + 7, "conversations": [{"from": "human", "value": text}]}
    return json.dumps(record, ensure_ascii=i % 2 == 0)


def bad_line(i: int, rng: random.Random, taken: str = "good-00000") -> str:
    """One hostile line of a class chosen by ``i``; never usable (``taken``: an id already
    used by an earlier line)."""
    user = f'[{{"role": "user", "content": "bad {i}"}}]'
    kind = i % 16
    if kind == 0:  # JSON nested ~100k deep (RecursionError in the decoder)
        depth = 100_000
        return f'{{"id": "deep-{i}", "messages": ' + "[" * depth + "]" * depth + "}"
    if kind == 1:  # nested past MAX_DEPTH but within the decoder's reach
        depth = MAX_DEPTH + 5
        nested = "[" * depth + "1" + "]" * depth
        return f'{{"id": "nest-{i}", "messages": {user}, "extra": {nested}}}'
    if kind == 2:  # lone surrogate in the content (the tokenizer's TypeError)
        return f'{{"id": "sc-{i}", "messages": [{{"role": "user", "content": "a\\udc80b"}}]}}'
    if kind == 3:  # lone surrogate in the id of an otherwise good record (parquet poison)
        return f'{{"id": "p\\udc80-{i}", "messages": {user}}}'
    if kind == 4:  # lone surrogate in the id of a rejected record (rejects.jsonl write)
        return f'{{"id": "r\\ud800-{i}", "messages": []}}'
    if kind == 5:  # escape sequence in the id
        return f'{{"id": "\\u001b]0;pwn\\u0007-{i}", "messages": {user}}}'
    if kind == 6:  # C1 control / bidi override / newline in the id
        return json.dumps({"id": rng.choice(["a\u009bb", "a\u202eb", "a\nb"]) + str(i),
                           "messages": json.loads(user)})
    if kind == 7:  # id too long
        return json.dumps({"id": "x" * (MAX_ID_CHARS + 1 + i % 5), "messages": json.loads(user)})
    if kind == 8:  # not UTF-8: a raw 0xff byte (written through surrogateescape)
        return '{"id": "u' + str(i) + '", "messages": [{"role": "user", "content": "\udcff"}]}'
    if kind == 9:
        return '{"id": "t' + str(i) + '", "messages": ['  # truncated JSON
    if kind == 10:
        return json.dumps([1, 2, i])
    if kind == 11:  # messages as a JSON string nested too deeply
        return json.dumps({"id": f"s-{i}", "messages": "[" * 5000 + "]" * 5000})
    if kind == 12:
        return json.dumps({"id": f"w-{i}", "messages": [{"role": "wizard", "content": "x"}]})
    if kind == 13:  # lone surrogate in a dict key
        return f'{{"id": "k-{i}", "messages": {user}, "\\udfff": 1}}'
    if kind == 14:
        return json.dumps({"id": f"e-{i}", "messages": [{"role": "user", "content": None}]})
    return json.dumps({"id": taken, "messages": json.loads(user)})  # a duplicate id


def write_fuzz(path: Path, count: int, seed: int) -> tuple[set[str], set[int]]:
    """``count`` lines, a UTF-8 BOM first; (good ids, bad line numbers)."""
    rng = random.Random(seed)
    good: set[str] = set()
    bad: set[int] = set()
    lines: list[bytes] = []
    for i in range(count):
        if i > 0 and rng.random() < 0.3:
            taken = max(good, key=lambda x: (len(x), x))  # an id an earlier good line has
            lines.append(bad_line(len(bad), rng, taken).encode("utf-8", "surrogateescape"))
            bad.add(i + 1)
        else:
            line = good_line(i, rng)
            record = json.loads(line)
            good.add(str(record["id"]) if "id" in record else "")
            lines.append(line.encode())
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")
    good.discard("")
    return good, bad


@pytest.mark.slow  # builds things: captures 3,000 fuzzed lines, then resumes them
@pytest.mark.parametrize("seed", [12, 2024])
async def test_fuzzed_prompt_file_finishes_with_every_line_accounted_for(
        tmp_path: Path, seed: int) -> None:
    prompts = tmp_path / "prompts.jsonl"
    good_ids, bad_lines = write_fuzz(prompts, FUZZ_LINES, seed)
    assert len(bad_lines) > 600 and {i % 16 for i in range(len(bad_lines))} == set(range(16))
    fake = FakeSGLang()
    config = make_config(tmp_path, [fake.url], concurrency=16, shard_rows=500)
    summary = await capture(config, [fake], bundled_tokenizer())

    assert summary.state == "finished" and summary.exit_code == 1  # finished, rows rejected
    stored = [r["sample_id"] for r in rows_of(config.out_dir)]
    assert len(stored) == len(set(stored))  # once each
    explicit = {s for s in stored if s.startswith("good-") or s.isdigit()}
    assert explicit == good_ids
    rejects = [json.loads(x) for x in (config.out_dir / "rejects.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert {r["line"] for r in rejects} == bad_lines
    assert all(r["source"] == str(prompts) and r["reason"] for r in rejects)
    assert summary.progress.counts.rejected == len(bad_lines)
    assert summary.progress.counts.written + summary.progress.counts.rejected == FUZZ_LINES
    # A resume meets the same lines again: nothing is sent twice, nothing new rejected.
    sent = len(fake.generate_bodies)
    again = await capture(make_config(tmp_path, [fake.url], resume=True), [fake],
                          bundled_tokenizer())
    assert again.state == "finished" and len(fake.generate_bodies) == sent
    assert again.progress.counts.already_done == len(stored)
    assert len((config.out_dir / "rejects.jsonl").read_text().splitlines()) == len(bad_lines)


def test_each_class_of_bad_line_names_its_reason(tmp_path: Path) -> None:
    rng = random.Random(1)
    path = tmp_path / "p.jsonl"
    first = json.dumps({"id": "good-00000", "messages": [{"role": "user", "content": "q"}]})
    path.write_bytes(b"\n".join([first.encode(), *(bad_line(i, rng).encode(
        "utf-8", "surrogateescape") for i in range(16))]) + b"\n")
    reasons = [item.reason for item in open_prompts(path)
               if isinstance(item, Reject)]
    expected = ["nested too deeply", f"more than {MAX_DEPTH} levels", "lone surrogate",
                "lone surrogate", "lone surrogate", "control character", "",
                f"at most {MAX_ID_CHARS}", "not UTF-8", "not valid JSON", "not an object",
                "nested too deeply", "'wizard'", "lone surrogate", "has no content",
                "duplicate"]
    assert len(reasons) == 16
    for reason, part in zip(reasons, expected, strict=True):
        assert part in reason, (part, reason)


def test_bom_on_line_one_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"messages": [
        {"role": "user", "content": "hi"}]}).encode() + b"\n")
    (item,) = list(open_prompts(path))
    assert isinstance(item, PromptRecord) and item.line == 1


def _gzip_lines(count: int) -> bytes:
    return gzip.compress(b"".join(json.dumps({"id": f"z{i}", "messages": [
        {"role": "user", "content": f"question {i} " * 20}]}).encode() + b"\n"
        for i in range(count)))


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
async def test_truncated_gzip_keeps_every_readable_record(tmp_path: Path, keep: float) -> None:
    whole = _gzip_lines(400)
    path = tmp_path / "prompts.jsonl.gz"
    path.write_bytes(whole[: int(len(whole) * keep)])
    items = list(open_prompts(path))
    records = [i for i in items if isinstance(i, PromptRecord)]
    (tail,) = [i for i in items if isinstance(i, Reject)]
    assert items[-1] is tail and tail.line == len(records) + 1
    assert "cut short" in tail.reason and f"after {len(records)} whole lines" in tail.reason
    assert [r.sample_id for r in records] == [f"z{i}" for i in range(len(records))]
    assert open_prompts(path).count() == len(items)

    fake = FakeSGLang()
    summary = await capture(make_config(tmp_path, [fake.url], prompts=path), [fake],
                            bundled_tokenizer())
    assert summary.state == "finished"
    assert sorted(r["sample_id"] for r in rows_of(tmp_path / "out")) == sorted(
        r.sample_id for r in records)


def test_gzip_of_several_members_and_corrupt_data(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl.gz"
    path.write_bytes(_gzip_lines(3) + _gzip_lines(2))
    assert [i.sample_id for i in open_prompts(path) if isinstance(i, PromptRecord)] == [
        "z0", "z1", "z2"]  # the second member's ids repeat: rejected as duplicates
    broken = bytearray(_gzip_lines(50))
    broken[len(broken) // 2: len(broken) // 2 + 40] = b"\x00" * 40
    path.write_bytes(bytes(broken))
    items = list(open_prompts(path))
    assert isinstance(items[-1], Reject) and "gzip data is corrupt" in items[-1].reason


def _parquet_with_groups(path: Path, groups: int, rows: int) -> None:
    records = [{"id": f"q{i}", "messages": json.dumps([{"role": "user", "content": f"q {i}"}])}
               for i in range(groups * rows)]
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=rows)


async def test_parquet_with_a_corrupt_row_group_keeps_the_others(tmp_path: Path) -> None:
    path = tmp_path / "prompts.parquet"
    _parquet_with_groups(path, 4, 50)
    column = pq.ParquetFile(path).metadata.row_group(2).column(1)
    data = bytearray(path.read_bytes())
    start = column.data_page_offset + 8
    data[start: start + 120] = b"\xff" * 120
    path.write_bytes(bytes(data))

    items = list(open_prompts(path))
    assert len(items) == 200 == open_prompts(path).count()
    lost = [i for i in items if isinstance(i, Reject)]
    assert [r.line for r in lost] == list(range(101, 151))
    assert all("row group 2 (rows 101-150)" in r.reason for r in lost)
    fake = FakeSGLang()
    summary = await capture(make_config(tmp_path, [fake.url], prompts=path), [fake],
                            bundled_tokenizer())
    assert summary.state == "finished" and summary.progress.counts.rejected == 50
    assert sorted(r["sample_id"] for r in rows_of(tmp_path / "out")) == sorted(
        f"q{i}" for i in [*range(100), *range(150, 200)])


def test_a_line_over_the_limit_is_rejected_without_being_held(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from eagle_tui.core.capture import prompts as module

    monkeypatch.setattr(module, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "p.jsonl"
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    path.write_text(good + "\n" + "x" * 5000 + "\n" + good.replace("hi", "ho") + "\n")
    kinds = [(type(i).__name__, i.line) for i in open_prompts(path)]
    assert kinds == [("PromptRecord", 1), ("Reject", 2), ("PromptRecord", 3)]
