"""Registry records for tests that plant or list batches without running one."""

from __future__ import annotations

from pathlib import Path

from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.urls import ServerURL


def stored_config(out_dir: Path, servers: tuple[str, ...] = ("http://127.0.0.1:30000",),
                  **fields: object) -> CaptureConfig:
    """A minimal valid batch config writing to ``out_dir``, as a record stores it."""
    return CaptureConfig(prompts=out_dir / "prompts.jsonl", out_dir=out_dir,
                         servers=tuple(ServerURL.parse(url) for url in servers),
                         tokenizer=out_dir / "tokenizer",
                         **fields).without_secrets()  # type: ignore[arg-type]
