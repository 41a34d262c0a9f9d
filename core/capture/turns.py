"""Driving conversations turn by turn (``capture --turns all``).

Each worker of the engine takes one :class:`ConversationJob` (a conversation under one
sampling preset) and drives it to its end: render turn k from its history, send it, store
the row, take the model's answer into the history, render turn k+1 and send it at once.
With as many conversations in flight as the engine has workers, the servers stay as busy
as with single-turn jobs. Turn k+1 prefers the server that answered turn k (its prefix
cache holds most of the new prompt).

Rendering and parsing the model's answer (decoding ids) run in one worker thread, off the
event loop, as single-turn rendering does.

Exactly once at turn granularity: a turn whose row id is already stored is never sent
again. With ``history="model"`` the stored rows are read back (their output ids parsed the
same way as a fresh answer) to rebuild the history, so a conversation continues from its
last stored turn after a crash. A turn the engine gave up on, or that could not be
rendered, ends the conversation when later turns depend on it (model history); with the
dataset's history the later turns are independent and go on.

A conversation that ends before its last turn says so: its last stored row is flagged
``conversation_ended``, and the turns never generated are counted per reason
(:meth:`ProgressTracker.conversation_ended`) for the summary, the manifest and ``stats``.
No single conversation stops the batch: an error while driving one ends it (logged, its
remaining turns counted under that reason) and the others go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec

from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.capture.control import RunControl
from eagle_tui.core.capture.conversation import (
    Conversation,
    DivergencePolicy,
    HistoryMode,
    TurnTag,
    Verdict,
    plan_turns,
    turn_sample_id,
)
from eagle_tui.core.capture.progress import ProgressTracker
from eagle_tui.core.capture.prompts import PromptRecord, Reject
from eagle_tui.core.capture.render import Job, Renderer
from eagle_tui.core.capture.sender import Outcome, Sender
from eagle_tui.core.capture.settle import Settler
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.core.tokenizer.kimi_parse import AnswerTokens, ParsedAnswer, parse_answer
from eagle_tui.core.validate import ending_reason

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ConversationJob:
    """One conversation to regenerate under one sampling preset."""

    record: PromptRecord
    preset: SamplingPreset

    @property
    def conversation_id(self) -> str:
        """The conversation's id: the record's sample id, with the preset's suffix."""
        return self.preset.sample_id(self.record.sample_id)


class AnswerDecoder(Protocol):
    """What parsing answers needs from a tokenizer (``LoadedTokenizer`` fits)."""

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str: ...


class StoredRows(Protocol):
    """Rows of earlier runs, by sample id (``ShardReader`` fits)."""

    def get(self, sample_id: str) -> ShardRow | None: ...


@dataclass(frozen=True)
class TurnSettings:
    """The multi-turn part of a batch's settings, and what the earlier runs left."""

    history: HistoryMode
    on_divergence: DivergencePolicy
    done_ids: frozenset[str]
    still_failed: Callable[[str], bool]
    think_id: int | None
    tokens: AnswerTokens

    @classmethod
    def of(cls, config: CaptureConfig, *, done_ids: frozenset[str],
           still_failed: Callable[[str], bool], think_id: int | None,
           tokens: AnswerTokens) -> TurnSettings:
        """Settings for ``config``."""
        return cls(config.history, config.on_divergence, done_ids, still_failed, think_id,
                   tokens)


class TurnDriver:
    """Drives conversations; one instance serves all of a batch's workers."""

    def __init__(self, settings: TurnSettings, *, renderer: Renderer, decoder: AnswerDecoder,
                 sender: Sender, settler: Settler, control: RunControl,
                 progress: ProgressTracker, stored: Callable[[], StoredRows]) -> None:
        self._settings = settings
        self._renderer = renderer
        self._decoder = decoder
        self._sender = sender
        self._settler = settler
        self._control = control
        self._progress = progress
        self._open_stored = stored
        self._stored: StoredRows | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turns")

    def close(self) -> None:
        """Release the worker thread (after the last ``drive``)."""
        self._thread.shutdown(wait=False, cancel_futures=True)

    async def drive(self, job: ConversationJob) -> None:
        """Generate every turn of ``job`` still to do, in order, until it ends."""
        run = _Run(job, Conversation(job.record.conversation, history=self._settings.history,
                                     on_divergence=self._settings.on_divergence))
        for turn in range(run.conversation.turns):
            if self._control.stopping:
                return  # the rest is left for the next resume
            if not await self._guarded_turn(run, turn):
                left = run.conversation.turns - turn - 1
                if not self._control.stopping and left:
                    self._progress.conversation_ended(
                        job.conversation_id, turn, run.ended or "ended", left)
                return

    async def _guarded_turn(self, run: _Run, turn: int) -> bool:
        """:meth:`_turn`, where an error in one conversation ends only that one."""
        try:
            return await self._turn(run, turn)
        except Exception as e:  # a poison record: the batch goes on without it
            log.exception("conversation %s: turn %d could not be driven; the conversation "
                          "ends there", run.job.conversation_id, turn)
            run.ended = f"error at this turn ({type(e).__name__})"
            return False

    async def _turn(self, run: _Run, turn: int) -> bool:
        """Do turn ``turn``; False when the conversation cannot go on."""
        row_id = turn_sample_id(run.job.conversation_id, turn)
        messages = run.conversation.prompt_messages(turn)
        if row_id in self._settings.done_ids:
            return await self._replay(run, turn, row_id)
        parent = run.parent if self._model_history() else None  # dataset turns stand alone
        job = Job(row_id, run.job.preset, (), run.job.record.source, run.job.record.line,
                  TurnTag(run.job.conversation_id, turn, parent), run.prefer)
        if self._settings.still_failed(row_id):
            self._settler.still_failed(job)
            run.ended = "this turn failed (kept for --retry-failed)"
            return not self._model_history()
        ids = await self._in_thread(self._renderer.render, replace(
            run.job.record, sample_id=row_id, messages=tuple(messages)))
        if isinstance(ids, Reject):
            self._settler.rejected(_turn_reject(ids, turn), rows=1)
            run.ended = "this turn could not be rendered (rejects.jsonl)"
            return not self._model_history()
        return await self._send(run, turn, replace(job, prompt_ids=ids))

    async def _send(self, run: _Run, turn: int, job: Job) -> bool:
        outcome = await self._sender.send(job)
        if outcome.kind != "ok":
            await self._settler.settle(job, outcome)
            run.ended = f"this turn {outcome.kind} (a resume sends it again)"
            return outcome.kind == "failed" and not self._model_history()
        verdict = await self._verdict(run, turn, job.prompt_ids, outcome)
        if not await self._settler.settle(job, outcome, verdict.flags):
            run.ended = "this turn was not stored"
            return not self._model_history()
        run.parent, run.prefer = job.sample_id, outcome.endpoint
        if verdict.ended is not None:
            log.info("conversation %s ends after turn %d: %s", run.job.conversation_id, turn,
                     verdict.ended)
        run.ended = verdict.reason
        return verdict.go_on

    async def _verdict(self, run: _Run, turn: int, prompt: Sequence[int],
                       outcome: Outcome) -> Verdict:
        if not self._model_history():
            return Verdict(go_on=True)
        assert outcome.result is not None
        answer = await self._in_thread(self._parse, prompt, outcome.result.output_ids)
        return run.conversation.record_answer(turn, answer, outcome.result.finish.kind)

    async def _replay(self, run: _Run, turn: int, row_id: str) -> bool:
        """A stored turn: counted as done; with model history its answer is read back."""
        self._settler.skipped(1)
        run.parent = row_id
        if not self._model_history():
            return True
        row = await self._in_thread(self._stored_row, row_id)
        if row is None:
            log.warning("conversation %s: stored turn %s cannot be read back; the "
                        "conversation ends there", run.job.conversation_id, row_id)
            run.ended = "its stored turn cannot be read back"
            return False
        run.prefer = row.endpoint  # the server that may still cache this conversation
        answer = await self._in_thread(self._parse, row.prompt_ids, row.output_ids)
        verdict = run.conversation.record_answer(turn, answer, row.finish_reason)
        run.ended = ending_reason(row.flags, row.finish_reason) if not verdict.go_on else None
        return verdict.go_on

    # -- in the worker thread ---------------------------------------------------------

    def _parse(self, prompt: Sequence[int], output: Sequence[int]) -> ParsedAnswer:
        return parse_answer(output, reasoning_open=_ends_with(prompt, self._settings.think_id),
                            tokens=self._settings.tokens, decode=self._decoder.decode)

    def _stored_row(self, row_id: str) -> ShardRow | None:
        if self._stored is None:
            self._stored = self._open_stored()
        return self._stored.get(row_id)

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, function, *args)

    def _model_history(self) -> bool:
        return self._settings.history == "model"


@dataclass
class _Run:
    """One conversation being driven: its state, the last row and the server it came from."""

    job: ConversationJob
    conversation: Conversation
    parent: str | None = None
    prefer: str | None = None
    ended: str | None = None  # why the last turn done ends the conversation, when it does


def _ends_with(ids: Sequence[int], token: int | None) -> bool:
    return token is not None and len(ids) > 0 and ids[-1] == token


def _turn_reject(reject: Reject, turn: int) -> Reject:
    return msgspec.structs.replace(reject, reason=f"turn {turn}: {reject.reason}")


class ConversationFeed:
    """Feeds ``queue`` with one :class:`ConversationJob` per record and preset, then None.

    Records are read (and decoded) in a worker thread, a chunk at a time; rejects go to
    ``on_reject`` on the event loop.
    """

    def __init__(self, records: Iterable[PromptRecord | Reject],
                 presets: tuple[SamplingPreset, ...], *, on_reject: Callable[[Reject], None],
                 chunk: int = 32) -> None:
        self._records: Iterator[PromptRecord | Reject] = iter(records)
        self._presets = presets
        self._on_reject = on_reject
        self._chunk = chunk

    async def run(self, queue: asyncio.Queue[Any]) -> None:
        """Everything into ``queue`` (waiting while it is full), then one None."""
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="records") as pool:
            while chunk := await loop.run_in_executor(pool, self._next_chunk):
                for item in chunk:
                    if isinstance(item, Reject):
                        self._on_reject(item)
                        continue
                    for preset in self._presets:
                        await queue.put(ConversationJob(item, preset))
        await queue.put(None)

    def _next_chunk(self) -> list[PromptRecord | Reject]:
        return [item for _, item in zip(range(self._chunk), self._records, strict=False)]


def count_turns(records: Iterable[PromptRecord | Reject]) -> int:
    """Turns over every usable record (the progress total, per preset)."""
    return sum(len(plan_turns(r.conversation)) for r in records if isinstance(r, PromptRecord))


def open_stored_rows(out_dir: Path) -> StoredRows:
    """The batch's trusted rows, read on demand (only resumed conversations ask)."""
    from eagle_tui.core.shards.reader import ShardReader

    return ShardReader(out_dir)
