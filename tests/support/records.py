"""Registry records for tests that plant or list batches without running one."""

from __future__ import annotations

from pathlib import Path

from eagle_tui.core.batches.configjson import StoredConfig


def stored_config(out_dir: Path, servers: tuple[str, ...] = ("http://127.0.0.1:30000",),
                  **fields: object) -> StoredConfig:
    """A minimal valid stored batch config writing to ``out_dir``."""
    return StoredConfig(prompts=str(out_dir / "prompts.jsonl"), out_dir=str(out_dir),
                        servers=servers, tokenizer=str(out_dir / "tokenizer"),
                        **fields)  # type: ignore[arg-type]
