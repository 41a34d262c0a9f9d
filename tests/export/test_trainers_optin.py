"""Opt-in: the trainers' own code takes an eagle-tui export row for row, ids unchanged.

Skipped unless ``EAGLE_TRAINERS_PYTHON`` names a Python with speculators and SpecForge
(``scripts/trainers/install.sh VENV`` makes one; then set it to ``VENV/bin/python``). Runs
speculators' ``prepare-data`` and SpecForge's ``prepare_prompt_tasks`` there (see
``trainer_check.py``) on exports of a batch captured with the bundled Kimi-shaped tokenizer,
and asserts every row comes back identical, also at a short max length where the trainers
cut and drop exactly the rows ``--max-length`` reports. Run with ``-s`` to see what the
trainers printed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from export_helpers import expected_mask, read_jsonl, shard_rows

from eagle_tui.core import kimi
from eagle_tui.core.export.options import ExportOptions, RowFilter
from eagle_tui.core.export.run import ExportResult, export
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.core.shards.schema import FooterTokenizer, ShardMetadata, ShardRow
from eagle_tui.core.shards.writer import ShardWriter
from eagle_tui.core.tokenizer import LoadedTokenizer, bundled_tokenizer_path, load_tokenizer
from eagle_tui.core.validate import validate_sample

TRAINERS_PYTHON = Path(os.environ.get("EAGLE_TRAINERS_PYTHON", "/nonexistent/trainers-python"))
CHECK = Path(__file__).with_name("trainer_check.py")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "export.md"
LONG = 4096
QUESTIONS = ("Add 2 and 2.", "Explain [INST] tags.\n\nThen stop.", "Sort [3, 1, 2] in Python.",
             "What is a list comprehension?", "Name three prime numbers.", "Why is the sky blue?",
             "Write `print('hi')` in Python.", "Say hello.", "Count to five.", "Reverse 'abc'.")
ANSWERS = ("Easy.", "Tags in brackets.\n\nDone.", "sorted([3, 1, 2])", "A compact loop.", "2, 3, 5",
           "Rayleigh scattering.", "print('hi')", "Hello.", "1 2 3 4 5", "'cba'")


def _trainers_missing() -> str | None:
    if not TRAINERS_PYTHON.exists():
        return ("set EAGLE_TRAINERS_PYTHON to a Python with speculators and SpecForge "
                "(scripts/trainers/install.sh VENV makes one)")
    probe = "import importlib.util as u; assert u.find_spec('speculators') and " \
            "u.find_spec('specforge')"
    done = subprocess.run([str(TRAINERS_PYTHON), "-c", probe], capture_output=True, check=False)
    return None if done.returncode == 0 else f"{TRAINERS_PYTHON} lacks speculators/specforge"


MISSING = _trainers_missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]


def kimi_batch(directory: Path, tok: LoadedTokenizer) -> Path:
    """A batch as capture writes it: rendered prompts ending in <think>, generated ids with
    </think>, a tool call, truncations, and rows the default filter drops."""
    boundary = tok.boundary_ids()
    config = BatchConfig("p.jsonl", "00", str(tok.path), tok.fingerprint(), tok.template_hash(),
                         SamplingIdentity(LONG, (SamplingPreset(),)))
    manifest = Manifest(directory, config)
    manifest.save_atomic()
    meta = ShardMetadata(
        tokenizer=FooterTokenizer(name=tok.name, path=str(tok.path), fingerprint=tok.fingerprint(),
                                  vocab_size=kimi.VOCAB_SIZE),
        template_hash=tok.template_hash(), boundary_ids=boundary.as_dict())
    with ShardWriter(directory, metadata=meta, manifest=manifest, max_rows=9,
                     row_group_rows=4) as writer:
        for i in range(30):
            writer.add(_row(i, tok, boundary))
    return directory


def _row(i: int, tok: LoadedTokenizer, boundary: Any) -> ShardRow:
    question, answer = QUESTIONS[i % 10] * (1 + i // 10), ANSWERS[i % 10]
    prompt = tok.render([{"role": "user", "content": question}])
    encode = lambda text: list(tok.hf.encode(text, add_special_tokens=False))  # noqa: E731
    output = [*encode(f"Thinking about it, step {i}."), kimi.THINK_END, *encode(answer)]
    if i % 7 == 3:
        output += [kimi.TOOL_CALLS_SECTION_BEGIN, kimi.TOOL_CALL_BEGIN, *encode("f:0"),
                   kimi.TOOL_CALL_END, kimi.TOOL_CALLS_SECTION_END]
    finish = "length" if i % 6 == 5 else "stop"
    output = output[:-2] if finish == "length" else [*output, kimi.IM_END]
    checked = validate_sample(prompt, output, finish_kind=finish,
                              completion_tokens=len(output) - (i % 11 == 4),
                              prompt_tokens=len(prompt), boundary=boundary,
                              vocab_size=kimi.VOCAB_SIZE)
    return ShardRow(f"k{i:04d}", prompt + output, len(prompt), finish,
                    kimi.IM_END if finish == "stop" else None, checked.think_end,
                    list(checked.flags), "http://127.0.0.1:30000", f"r{i}", 1.0,
                    datetime(2026, 1, 2, tzinfo=UTC))


def tokenizer_only_dir(target: Path) -> Path:
    """docs/export.md's recipe: the tokenizer files without config.json."""
    target.mkdir()
    for path in bundled_tokenizer_path().glob("tokenizer*"):
        shutil.copy(path, target / path.name)
    return target


def specforge_config(path: Path, prompts: Path) -> Path:
    """docs/export.md's SpecForge run config, pointed at ``prompts``."""
    block = re.search(r"```yaml\n(.*?)```", DOCS.read_text(), re.S)
    assert block, "docs/export.md lost its SpecForge run config"
    text = re.sub(r"prompts_path: .*", f"prompts_path: {prompts}", block.group(1))
    path.write_text(text)
    return path


def truncated(rows: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """What a trainer keeps at ``limit``: rows cut to it, rows with nothing to train gone."""
    cut = [{k: r[k][:limit] for k in ("input_ids", "loss_mask")} for r in rows]
    return [r for r in cut if sum(r["loss_mask"])]


def as_multiset(rows: list[dict[str, Any]]) -> Counter[tuple[tuple[int, ...], tuple[int, ...]]]:
    return Counter((tuple(r["input_ids"]), tuple(r["loss_mask"])) for r in rows)


def test_trainers_take_every_exported_row_identical(tmp_path: Path) -> None:
    tok = load_tokenizer(bundled_tokenizer_path())
    batch = kimi_batch(tmp_path / "batch", tok)
    short = sorted(len(r["input_ids"]) for r in shard_rows(batch))[0] - 3
    results: dict[str, ExportResult] = {}
    for fmt in ("speculators", "specforge"):
        results[fmt] = export([batch], tmp_path / f"{fmt}.jsonl",
                              ExportOptions(fmt, max_length=short))  # type: ignore[arg-type]
    spec_rows = read_jsonl(tmp_path / "speculators.jsonl")
    forge_rows = read_jsonl(tmp_path / "specforge.jsonl")
    job = {
        "speculators": [
            {"data": str(tmp_path / "speculators.jsonl"), "model": str(tokenizer_only_dir(
                tmp_path / "kimi-tokenizer")), "output": str(tmp_path / "prep"),
             "seq_length": LONG},
            {"data": str(tmp_path / "speculators.jsonl"), "model": str(tmp_path /
             "kimi-tokenizer"), "output": str(tmp_path / "prep-short"), "seq_length": short},
            {"data": str(tmp_path / "speculators.jsonl"), "model": str(bundled_tokenizer_path()),
             "output": str(tmp_path / "prep-model-dir"), "seq_length": LONG},
        ],
        "specforge": [{"data": str(tmp_path / "specforge.jsonl"), "max_length": LONG},
                      {"data": str(tmp_path / "specforge.jsonl"), "max_length": short}],
        "specforge_config": str(specforge_config(tmp_path / "run.yaml",
                                                 tmp_path / "specforge.jsonl")),
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    done = subprocess.run([str(TRAINERS_PYTHON), str(CHECK), str(tmp_path / "job.json")],
                          capture_output=True, text=True, timeout=900, check=False)
    print(done.stdout.rsplit("\n", 2)[0], done.stderr[-2000:], sep="\n")
    assert done.returncode == 0, done.stderr[-4000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    full, short_run, model_dir = answer["speculators"]
    forge_full, forge_short = answer["specforge"]

    source = [r for r in shard_rows(batch)
              if RowFilter().reason(r["flags"], r["finish_reason"]) is None]
    assert len(source) < 30 and [r["input_ids"] for r in spec_rows] == \
        [r["input_ids"] for r in source]
    assert [r["loss_mask"] for r in forge_rows] == [expected_mask(r, 1) for r in source]

    # every row back, identical (speculators shuffles: compare as multisets)
    assert full["rows"] is not None and len(full["rows"]) == len(source)
    assert as_multiset(full["rows"]) == as_multiset(spec_rows)
    assert forge_full["rows"] == forge_rows
    # at the short length, the trainers cut and drop what --max-length reported
    for fmt, rows, got in (("speculators", spec_rows, short_run["rows"]),
                           ("specforge", forge_rows, forge_short["rows"])):
        report = results[fmt].counts.length
        assert report is not None and report.dropped > 0 and report.cut > 0
        assert len(got) == results[fmt].counts.kept - report.dropped, fmt
        assert as_multiset(got) == as_multiset(truncated(rows, short)), fmt
    assert answer["specforge_config"]["prompts_path"] == str(tmp_path / "specforge.jsonl")
    # Why docs/export.md passes a tokenizer-only directory: with transformers 5.19 prepare-data
    # refuses the model directory (config.json says kimi_k25: "Can't load image processor");
    # 5.8.1 only warns. Reported, not asserted: it depends on transformers, not on us.
    print(f"prepare-data --model on a directory with config.json (kimi_k25): exit "
          f"{model_dir['returncode']}; on the tokenizer-only directory: exit "
          f"{full['returncode']}")
    print(f"eagle-tui: {len(source)} rows exported; speculators prepare-data returned "
          f"{len(full['rows'])} identical rows, SpecForge prepare_prompt_tasks "
          f"{len(forge_full['rows'])}; at max length {short}: speculators "
          f"{len(short_run['rows'])}, SpecForge {len(forge_short['rows'])} "
          f"(export reported: speculators {results['speculators'].counts.text(lead='kept')}; "
          f"specforge {results['specforge'].counts.text(lead='kept')})")
