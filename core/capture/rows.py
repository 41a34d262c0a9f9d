"""One finished generation to one shard row: ids exactly as sent and received, plus flags.

``input_ids`` is the prompt as sent followed by ``output_ids`` as the server returned them,
never re-tokenized. It is kept as a compact ``array('i')`` (4 bytes per id instead of
about 36 for a tuple of Python ints), which matters with thousands of rows in flight to
the writer.

A speculative answer's acceptance (parsed from ``meta_info`` by ``core.accept``) is kept on
the row as the stored counts of the shard's acceptance column.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from eagle_tui.core.accept.requests import RequestAcceptance
from eagle_tui.core.capture.render import Job
from eagle_tui.core.sglang.types import GenerateResult
from eagle_tui.core.shards.schema import MAX_COUNT, ShardRow
from eagle_tui.core.tokenizer import BoundaryIds
from eagle_tui.core.validate import FLAGS, Validation, validate_sample


@dataclass(frozen=True, slots=True)
class RowBuilder:
    """Builds validated rows with the batch's boundary ids and vocabulary bound."""

    boundaries: BoundaryIds
    vocab_size: int
    max_new_tokens: int | None = None

    def validate(self, job: Job, result: GenerateResult) -> Validation:
        """Flags and think_end position of one generation."""
        return validate_sample(
            job.prompt_ids,
            result.output_ids,
            finish_kind=result.finish.kind,
            completion_tokens=result.completion_tokens,
            prompt_tokens=result.prompt_tokens,
            boundary=self.boundaries,
            vocab_size=self.vocab_size,
            max_new_tokens=self.max_new_tokens,
        )

    def build(self, job: Job, result: GenerateResult, endpoint: str, rid: str,
              extra_flags: tuple[str, ...] = (),
              acceptance: RequestAcceptance | None = None) -> ShardRow:
        """The row for ``job`` answered by ``result`` from ``endpoint`` (a public URL);
        ``extra_flags`` are flags found outside the ids (a diverged tool call);
        ``acceptance`` is the answer's, when the server speculated."""
        checked = self.validate(job, result)
        flags = checked.flags
        if extra_flags:
            flags = tuple(f for f in FLAGS if f in {*flags, *extra_flags})
        turn = job.turn
        # Converting the tuple to an array first is about twice as fast as extend(tuple).
        ids = array("i", job.prompt_ids)
        ids.extend(array("i", result.output_ids))
        return ShardRow(
            sample_id=job.sample_id,
            input_ids=ids,
            prompt_len=len(job.prompt_ids),
            finish_reason=result.finish.kind,
            matched_stop=result.finish.matched_token,
            think_end=checked.think_end,
            flags=flags,
            endpoint=endpoint,
            rid=rid,
            latency_s=result.latency_s,
            created_at=datetime.now(UTC),
            conversation_id=turn.conversation_id if turn else None,
            turn=turn.turn if turn else None,
            parent_id=turn.parent_id if turn else None,
            acceptance=column_counts(acceptance),
        )


def column_counts(acceptance: RequestAcceptance | None) -> dict[str, Any] | None:
    """The counts the acceptance column stores (its fields are ``RequestAcceptance``'s);
    None without acceptance, or when a count does not fit the column (a server's nonsense
    must not cost the row)."""
    if acceptance is None:
        return None
    counts = msgspec.to_builtins(acceptance)
    values = [*(counts[name] for name in counts if name != "histogram"), *counts["histogram"]]
    return counts if max(values, default=0) <= MAX_COUNT else None
