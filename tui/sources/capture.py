"""Capture batches as the Capture and Streams views see them, behind one small interface.

``CaptureControl`` is all the views use: list batch snapshots, start a batch from a
``BatchRequest``, pause / resume / stop one, ask it to stream the next N requests, and take
the token events of the watched ones. ``tui.sources.batches.DetachedCapture`` implements it
over detached batch workers (``core.batches``): batches run outside the dashboard's
process and outlive it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from eagle_tui.core.batchstate import LIVE_STATES
from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.capture.events import CaptureEvent
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.urls import ServerURL, url_error
from eagle_tui.tui.render.batch import BatchSnapshot

if TYPE_CHECKING:
    from eagle_tui.core.shards.schema import ShardRow

PRESETS: dict[str, SamplingPreset] = {
    "greedy": SamplingPreset("", temperature=0.0),
    "default": SamplingPreset("", temperature=1.0),
    "kimi": SamplingPreset("", temperature=1.0, top_p=0.95),
}
__all__ = ["LIVE_STATES", "PRESETS", "BatchRequest", "CaptureControl", "validate_request"]


@dataclass(frozen=True)
class BatchRequest:
    """What the new-batch form asks for."""

    prompts: Path
    out_dir: Path
    servers: tuple[str, ...]
    tokenizer: Path
    preset: str = "greedy"
    concurrency: int = 8
    max_new_tokens: int = 4096
    resume: bool = False
    shard_rows: int = 2000
    shard_max_age_s: float = 120.0
    name: str = ""
    """The batch's name in the registry ("": the output directory's name)."""

    def to_config(self) -> CaptureConfig:
        """The engine's config (ConfigError when a field is unusable)."""
        if self.preset not in PRESETS:
            raise ConfigError(f"unknown sampling preset {self.preset!r}; use {', '.join(PRESETS)}")
        return CaptureConfig(
            prompts=self.prompts,
            out_dir=self.out_dir,
            servers=tuple(_server(text) for text in self.servers),
            tokenizer=self.tokenizer,
            presets=(PRESETS[self.preset],),
            concurrency=self.concurrency,
            max_new_tokens=self.max_new_tokens,
            resume=self.resume,
            shard_rows=self.shard_rows,
            shard_max_age_s=self.shard_max_age_s,
        )


class CaptureControl(Protocol):
    """What the views need from capture (detached workers behind their control API)."""

    def batches(self) -> tuple[BatchSnapshot, ...]:
        """Every known batch, newest last (non-blocking)."""
        ...

    def start(self, request: BatchRequest) -> str:
        """Start a batch; its id. ConfigError when it cannot start. May block (worker)."""
        ...

    def pause(self, batch_id: str) -> None:
        """Send no new requests (in-flight ones finish)."""
        ...

    def resume(self, batch_id: str) -> None:
        """Undo ``pause``; for a ``resumable`` batch, start a new run that continues it."""
        ...

    def stop(self, batch_id: str, *, abort: bool) -> None:
        """Stop: drain in-flight requests (``abort`` False) or abort them."""
        ...

    def watch(self, batch_id: str, count: int) -> None:
        """Stream the next ``count`` requests of the batch (token deltas as events)."""
        ...

    def take_events(self, batch_id: str, limit: int = 10_000) -> list[CaptureEvent]:
        """Events of watched requests since the last call (oldest first)."""
        ...

    def following(self, batch_id: str) -> bool:
        """True while events of ``batch_id`` may still come: its event follower runs, or
        events it received are not taken yet."""
        ...

    def recent(self, batch_id: str) -> list[ShardRow]:
        """The newest finished rows of a running batch, from its worker (BLOCKING: call
        from a worker thread); [] when it cannot say. Samples before its first shard."""
        ...

    def close(self) -> None:
        """Release threads and connections (detached batches keep running)."""
        ...


def validate_request(request: BatchRequest) -> CaptureConfig:
    """Check a request before starting it (cheap checks only); ConfigError says what to fix."""
    from eagle_tui.core.capture.prompts import open_prompts

    config = request.to_config()
    open_prompts(config.prompts)
    if not config.tokenizer.is_dir():
        raise ConfigError(f"tokenizer directory {config.tokenizer} does not exist")
    if BatchDir(config.out_dir).holds_batch() and not config.resume:
        raise ConfigError(f"{config.out_dir} already holds a batch; tick resume or pick another")
    return config


def _server(text: str) -> ServerURL:
    """A server URL of the form (ConfigError naming it when it cannot be one)."""
    if (problem := url_error(text)) is not None:
        raise ConfigError(problem)
    return ServerURL.parse(text)
