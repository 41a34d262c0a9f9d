"""Prompt records to prompt ids, off the event loop, into a bounded queue of jobs.

One worker thread reads the prompt file and renders chunks of records with the target's
chat template; the event loop only moves finished chunks into the job queue. The queue is
bounded, so at most a few hundred rendered prompts exist at any time whatever the file
size, and the thread idles while dispatch is behind. (A process pool was not worth it: a
chat-template render costs well under a millisecond per prompt here, see
``tests/benchmarks/bench_capture.py``, far below what one request costs the client.)

Each record becomes one job per sampling preset not yet done. A record that cannot be
rendered, renders empty, or holds an id outside the model's vocabulary becomes a
``Reject`` instead: one out-of-range id crashes a whole SGLang server, and SGLang does not
check.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from eagle_tui.core.capture.conversation import TurnTag
from eagle_tui.core.capture.prompts import PromptRecord, Reject
from eagle_tui.core.errors import TokenizerError
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.text import clip

log = logging.getLogger(__name__)


class PromptRenderer(Protocol):
    """What rendering needs from a tokenizer (``LoadedTokenizer`` fits)."""

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **template_kwargs: Any,
    ) -> list[int]: ...


@dataclass(frozen=True, slots=True)
class Job:
    """One row to generate: a rendered prompt under one sampling preset.

    Multi-turn rows carry their place in the conversation (``turn``) and the server that
    answered the turn before (``prefer``: its prefix cache holds most of this prompt).
    """

    sample_id: str
    preset: SamplingPreset
    prompt_ids: tuple[int, ...]
    source: str
    line: int
    turn: TurnTag | None = None
    prefer: str | None = None


def first_out_of_range(ids: Sequence[int], bound: int) -> tuple[int, int] | None:
    """(position, id) of the first id outside ``[0, bound)``, or None when all are valid."""
    if not ids or (min(ids) >= 0 and max(ids) < bound):  # the common case, at C speed
        return None
    for position, token in enumerate(ids):
        if not 0 <= token < bound:
            return position, token
    return None


class Renderer:
    """Renders one record to prompt ids or a Reject (synchronous; runs in a thread)."""

    def __init__(
        self,
        tokenizer: PromptRenderer,
        *,
        vocab_size: int,
        think_id: int | None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self._tokenizer = tokenizer
        self._vocab_size = vocab_size
        self._think_id = think_id
        self._template_kwargs = dict(template_kwargs or {})
        self.without_think = 0

    def render(self, record: PromptRecord) -> tuple[int, ...] | Reject:
        """The prompt ids of ``record``, or why it cannot be sent."""
        try:
            ids = self._tokenizer.render(record.messages, record.tools, **self._template_kwargs)
        except TokenizerError as e:
            return self._reject(record, f"chat template failed: {e}")
        except Exception as e:  # tokenizers and Jinja on input they choke on (TypeError, ...)
            return self._reject(record, f"the tokenizer refused this record "
                                        f"({type(e).__name__}: {clip(str(e), 200)})")
        if not ids:
            return self._reject(record, "chat template rendered no tokens")
        bad = first_out_of_range(ids, self._vocab_size)
        if bad is not None:
            position, token = bad
            return self._reject(
                record,
                f"prompt id {token} at position {position} is outside the model's vocabulary "
                f"(size {self._vocab_size}); sending it would crash the server. Check that "
                "--tokenizer belongs to the served model",
            )
        self._check_think(record, ids)
        return tuple(ids)

    def _check_think(self, record: PromptRecord, ids: Sequence[int]) -> None:
        if self._think_id is None or ids[-1] == self._think_id:
            return
        self.without_think += 1
        if self.without_think == 1:
            log.warning(
                "%s:%d (sample %s): the rendered prompt ends with id %d, not the think token "
                "%d; the model will not start inside reasoning. Expected for a non-thinking "
                "template; otherwise check --tokenizer and the template kwargs. "
                "(Warned once; rows are flagged prompt_no_think.)",
                record.source, record.line, record.sample_id, ids[-1], self._think_id,
            )

    @staticmethod
    def _reject(record: PromptRecord, reason: str) -> Reject:
        return Reject(record.source, record.line, reason, record.sample_id)


@dataclass(frozen=True, slots=True)
class _Kept:
    """A row that stays failed on this resume (its prompt is not rendered or sent)."""

    job: Job


class RenderPipeline:
    """Feeds ``queue`` with jobs rendered in a worker thread, then one ``None`` at the end.

    ``pending_presets(sample_id)`` names the presets still to do for a prompt (resume
    passes the ones whose rows are not in a complete shard); a prompt with none is skipped
    without rendering. ``still_failed(row_id)`` is True for a row that stays failed (a
    resume does not resend it); it goes to ``on_still_failed`` instead of the queue.
    ``on_reject``, ``on_skip`` and ``on_still_failed`` run on the event loop.
    """

    def __init__(
        self,
        records: Iterable[PromptRecord | Reject],
        renderer: Renderer,
        presets: tuple[SamplingPreset, ...],
        *,
        pending_presets: Callable[[str], tuple[SamplingPreset, ...]],
        on_reject: Callable[[Reject], None],
        on_skip: Callable[[int], None],
        still_failed: Callable[[str], bool] = lambda row_id: False,
        on_still_failed: Callable[[Job], None] = lambda job: None,
        chunk: int = 32,
    ) -> None:
        self._records: Iterator[PromptRecord | Reject] = iter(records)
        self._renderer = renderer
        self._presets = presets
        self._pending = pending_presets
        self._on_reject = on_reject
        self._on_skip = on_skip
        self._still_failed = still_failed
        self._on_still_failed = on_still_failed
        self._chunk = chunk
        self.rendered = 0
        self.render_s = 0.0

    async def run(self, queue: asyncio.Queue[Any]) -> None:
        """Render everything into ``queue`` (waiting while it is full), then put None."""
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="render") as pool:
            while True:
                chunk = await loop.run_in_executor(pool, self._next_chunk)
                if not chunk:
                    break
                for item in chunk:
                    await self._deliver(item, queue)
        await queue.put(None)

    async def _deliver(self, item: Job | Reject | int | _Kept, queue: asyncio.Queue[Any]) -> (
        None
    ):
        if isinstance(item, _Kept):
            self._on_still_failed(item.job)
        elif isinstance(item, Job):
            await queue.put(item)
        elif isinstance(item, Reject):
            self._on_reject(item)
        else:
            self._on_skip(item)

    def _next_chunk(self) -> list[Job | Reject | int | _Kept]:
        """Up to ``chunk`` records' worth of jobs, rejects and skip counts (worker thread)."""
        started = time.perf_counter()
        out: list[Job | Reject | int | _Kept] = []
        for record in self._records:
            out.extend(self._expand(record))
            if len(out) >= self._chunk:
                break
        self.render_s += time.perf_counter() - started
        return out

    def _expand(self, record: PromptRecord | Reject) -> list[Job | Reject | int | _Kept]:
        if isinstance(record, Reject):
            return [record]
        pending = self._pending(record.sample_id)
        skipped = len(self._presets) - len(pending)
        out: list[Job | Reject | int | _Kept] = [skipped] if skipped else []
        kept = [p for p in pending if self._still_failed(p.sample_id(record.sample_id))]
        if kept:
            out += [_Kept(Job(p.sample_id(record.sample_id), p, (), record.source,
                              record.line)) for p in kept]
            pending = tuple(p for p in pending if p not in kept)
        if not pending:
            return out
        ids = self._renderer.render(record)
        self.rendered += 1
        if isinstance(ids, Reject):
            return [*out, ids]
        return [*out, *(Job(p.sample_id(record.sample_id), p, ids, record.source, record.line)
                        for p in pending)]
