"""Speculative decoding as SGLang 0.5.23 reports it: verify steps, accepted drafts, counts.

A request's first token comes from its prefill; every later step of the scheduler is one
*verify step*: the drafter proposes ``num_draft_tokens - 1`` drafts, the target accepts a
prefix of them and adds its own bonus token, so a step emits 1 + accepted tokens. What the
sim accepts, per step:

- drafts the drafter "knows": position j (1-based) is accepted, given the ones before it,
  with probability ``draft_acceptance x shape x POSITION_DECAY ** (j - 1)``, where the
  prompt's shape sets ``shape`` (``SHAPE_FACTORS``: reasoning is harder to draft than plain
  prose, tool-call syntax easier), so acceptance depends on the category and the position;
- drafts that repeat earlier output: an n-gram lookup over the request's own output (as
  NGRAM does and as a drafter does on a loop) is accepted as far as the planned tokens
  match it, so a degenerate, repeating answer accepts nearly every draft;
- nothing, when the drafter does not fit the algorithm: an EAGLE3 draft under
  ``--speculative-algorithm EAGLE`` (sglang PR #21272) accepts exactly 1.00 per step.

The counts follow the recordings (tests/fixtures/realsglang-spec): ``completion_tokens`` =
1 + verify steps + accepted drafts for an answer that stopped on its own; one cut at
``max_new_tokens`` keeps the last step's accepted drafts in the count while its surplus
tokens are dropped. The histogram is as long as the most drafts any step accepted, plus one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Final

from eagle_tui.core.sim.config import SpecSettings
from eagle_tui.core.sim.model.prompt_shape import PromptShape
from eagle_tui.core.sim.request import SpecCounts

POSITION_DECAY: Final = 0.8
"""Each later draft position is accepted this much less often than the one before."""

SHAPE_FACTORS: Final = {"thinking": 0.8, "tools": 1.2, "plain": 1.0}
"""How the prompt's shape scales the drafter's acceptance (a category's signature)."""

MAX_PROBABILITY: Final = 0.98


def mismatched_drafter(settings: SpecSettings) -> bool:
    """An EAGLE3 drafter launched as EAGLE: SGLang runs it and accepts nothing."""
    path = (settings.draft_model_path or "").lower()
    return settings.algorithm == "EAGLE" and "eagle3" in path


def shape_name(shape: PromptShape) -> str:
    """The key of ``SHAPE_FACTORS`` for a prompt."""
    if shape.tools_text is not None and not shape.answered_tool:
        return "tools"
    return "thinking" if shape.thinking else "plain"


def position_probabilities(settings: SpecSettings, shape: PromptShape) -> tuple[float, ...]:
    """P(draft j accepted | drafts before it accepted), j = 1..k; empty when the drafter
    accepts nothing at all (a mismatched drafter), which also turns off n-gram matches."""
    if mismatched_drafter(settings):
        return ()
    base = settings.draft_acceptance * SHAPE_FACTORS[shape_name(shape)]
    return tuple(min(MAX_PROBABILITY, base * POSITION_DECAY ** j)
                 for j in range(settings.drafts_per_step))


def new_counts(settings: SpecSettings, shape: PromptShape, seed: int) -> SpecCounts:
    """A request's counts, with its own generator (the same prompt draws the same steps)."""
    return SpecCounts(settings.drafts_per_step, position_probabilities(settings, shape),
                      random.Random(seed ^ 0x5BEC))


def meta_fields(counts: SpecCounts, completion_tokens: int) -> dict[str, Any]:
    """The ``spec_*`` keys of a finished answer's ``meta_info``, in SGLang's order; none
    without a verify step."""
    if counts.verify_steps == 0:
        return {}
    proposed = counts.proposed_drafts
    return {
        "spec_accept_rate": counts.correct_drafts / proposed if proposed else 0.0,
        "spec_accept_length": completion_tokens / counts.verify_steps,
        "spec_num_correct_drafts": counts.correct_drafts,
        "spec_num_proposed_drafts": proposed,
        "spec_verify_ct": counts.verify_steps,
        "spec_correct_drafts_histogram": list(counts.histogram),
    }


@dataclass
class SpecLogWindow:
    """Verify steps since the last decode line, and those already logged (the lifetime
    ``avg_spec_accept_length``, which ``/flush_cache`` on an idle server resets)."""

    steps: int = 0
    accepted_tokens: int = 0  # bonus + accepted drafts, no prefill token
    correct_drafts: int = 0
    proposed_drafts: int = 0
    logged_steps: int = 0
    logged_tokens: int = 0
    last_accept_length: float = 0.0
    last_accept_rate: float = 0.0

    def add(self, correct: int, drafts_per_step: int) -> None:
        """Count one verify step."""
        self.steps += 1
        self.accepted_tokens += 1 + correct
        self.correct_drafts += correct
        self.proposed_drafts += drafts_per_step

    def close(self) -> tuple[float, float]:
        """End an interval: its accept length and rate (kept for the gauges)."""
        if self.steps:
            self.last_accept_length = self.accepted_tokens / self.steps
            self.last_accept_rate = (self.correct_drafts / self.proposed_drafts
                                     if self.proposed_drafts else 0.0)
            self.logged_steps += self.steps
            self.logged_tokens += self.accepted_tokens
        self.steps = self.accepted_tokens = self.correct_drafts = self.proposed_drafts = 0
        return self.last_accept_length, self.last_accept_rate

    @property
    def lifetime(self) -> float | None:
        """``avg_spec_accept_length``: None until a line was logged (or after a flush)."""
        return self.logged_tokens / self.logged_steps if self.logged_steps else None

    def flush(self) -> None:
        """``/flush_cache`` on an idle server."""
        self.logged_steps = self.logged_tokens = 0
