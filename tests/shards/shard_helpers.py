"""Shared helpers for the shard tests: rows, metadata, config."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.core.shards.schema import FooterServer, FooterTokenizer, ShardMetadata, ShardRow

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

CONFIG = BatchConfig(
    prompt_file="/data/prompts.jsonl",
    prompt_sha256="ab" * 32,
    tokenizer_path="/models/kimi",
    tokenizer_fingerprint="cd" * 32,
    template_hash="ef" * 32,
    sampling=SamplingIdentity(max_new_tokens=64, presets=(SamplingPreset(temperature=1.0),)),
)

META = ShardMetadata(
    tokenizer=FooterTokenizer(name="kimi-k2.5-tiny", path="/models/kimi",
                              fingerprint="cd" * 32, vocab_size=163840),
    template_hash="ef" * 32,
    sampling={"max_new_tokens": 64, "temperature": 1.0},
    server=FooterServer(model_path="/models/kimi", version="0.5.3"),
    boundary_ids={"think": 163606, "think_end": 163607, "stop": [163586],
                  "tool_call": [163595, 163596, 163597, 163598, 163599]},
)


def make_row(i: int, *, tokens: int = 20, prompt_len: int = 5,
             flags: Sequence[str] = ()) -> ShardRow:
    """A deterministic row whose ids encode ``i`` (so rows differ)."""
    ids = [(i * 7919 + k * 104729) % 163840 for k in range(tokens)]
    return ShardRow(
        sample_id=f"s{i:06d}", input_ids=ids, prompt_len=prompt_len,
        finish_reason="length" if i % 5 == 4 else "stop",
        matched_stop=None if i % 5 == 4 else 163586, think_end=-1 if i % 3 else prompt_len + 2,
        flags=list(flags), endpoint="http://gpu-1:30000", rid=f"rid-{i}",
        latency_s=0.25 * (i % 8), created_at=T0 + timedelta(seconds=i),
    )


def new_batch(directory: Path) -> Manifest:
    """A saved manifest (no shards) in ``directory``."""
    manifest = Manifest(directory, CONFIG)
    manifest.save_atomic()
    return manifest
